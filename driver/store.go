package driver

// Store is the base contract of every store, whatever primitives it offers.
// A primitive is an interface that embeds Store (Mutex today; a semaphore,
// a read-write lock or a limiter would each be one more); a store offers a
// primitive by implementing its interface, and a capability by implementing
// an optional interface (Notifier, Queuer, SessionKeeper, Doctor, ...),
// each of which says what the client does when it is absent. What works on
// any store takes a Store: As and Unwrapper, Opened.Store and
// drivertest.Harness.New; a caller asserts the primitive it needs
// (s.(Mutex)), and finds a capability with As.
type Store interface {
	// Model declares the store's time and liveness model. It does no I/O and
	// returns the same value every time.
	Model() Model
}
