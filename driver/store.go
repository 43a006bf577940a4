package driver

import "time"

// Store is the base contract of every store, whatever primitives it offers.
// A primitive is an interface that embeds Store (Mutex, Semaphore,
// RWMutex, RateLimiter and Idempotency today); a store offers a
// primitive by implementing its interface, and a capability by implementing
// an optional interface (Notifier, Queuer, SessionKeeper, Doctor, ...),
// each of which says what the client does when it is absent. What works on
// any store takes a Store: As and Unwrapper, Opened.Store and
// drivertest.Harness.New; a caller asserts the primitive it needs
// (s.(Mutex), s.(Semaphore)), and finds a capability with As.
type Store interface {
	// Model declares the store's time and liveness model. It does no I/O and
	// returns the same value every time.
	Model() Model
}

// Model is a store's time and liveness model: what lease lengths it can keep,
// whose clock decides expiry, and whether locks live in a session.
type Model struct {
	// MinTTL and MaxTTL bound the ttl a per-key store can honour (MaxTTL 0:
	// no upper bound). The client refuses a WithTTL or WithAutoRenew outside
	// them with ErrInvalid before any I/O, and brings its default lease
	// within them. Session-based stores leave them zero.
	MinTTL, MaxTTL time.Duration
	// Granularity is the unit the store keeps TTLs in (a millisecond on
	// Redis, a second on etcd). The client rounds lease lengths up to it.
	Granularity time.Duration
	// ServerClock reports that expiry is decided on the server's clock, so
	// client clocks need not agree (only run at similar rates).
	ServerClock bool
	// Session reports that holdings live as long as one session of the store
	// (etcd lease, ZooKeeper session, database connection), not a per-key
	// TTL. All of a store's holdings share the session; renewal is the
	// session's keepalive (Extend; SessionKeeper where nothing extends);
	// the TTL a client asks for is replaced by SessionTTL.
	Session bool
	// SessionTTL is the session's time to live, when Session is set.
	SessionTTL time.Duration
}

// TTLFor returns the lease length the client uses for a requested ttl under
// m: the session's TTL on session-based stores, else ttl rounded up to the
// granularity.
func (m Model) TTLFor(ttl time.Duration) time.Duration {
	if m.Session && m.SessionTTL > 0 {
		return m.SessionTTL
	}
	if g := m.Granularity; g > 0 && ttl%g != 0 {
		ttl += g - ttl%g
	}
	return ttl
}
