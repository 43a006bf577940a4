// Package driver holds the contracts between dlock's generic machinery and
// the stores that keep lock state on a server. It is for store authors; users
// of locks need only package dlock and a store's constructor.
//
// Start with Mutex, the interface every lock store implements, and Model,
// its declared time model (Semaphore, the counting primitive, RWMutex,
// the read-write lock, and RateLimiter, GCRA on the store's clock, follow the
// same pattern); then the optional capabilities, each of which
// says what the client does without it. The repository's
// docs/writing-a-store.md walks through writing a store, and
// drivertest.Run checks one against these contracts.
//
// The split follows gocloud.dev's driver packages: this package has
// interfaces, plain data types, the errors both sides share, and two small
// mechanisms, As and the URL opener registry (Register, Open). A store
// implements one interface per primitive (Mutex, Semaphore, RWMutex,
// RateLimiter and Idempotency today), each built on the
// base contract Store, declares its time and liveness model (Model) and
// implements any number of optional capabilities. The client finds each
// capability once, when it is created, through As, which also looks through
// wrappers that implement Unwrapper. Every capability documents what the
// client does when a store does not have it.
//
// A store that has a capability's method but cannot serve it at the moment
// of the call (Redlock over nodes that cannot notify or inspect) returns an
// error matching errors.ErrUnsupported, made with Unsupported. Where a
// fallback exists the client takes it: a Subscribe that fails in any way
// makes waiters back off as without a Notifier, and dlock status, list and
// doctor report that the store cannot inspect, list, count waiters or run
// its checks. The capabilities on the lock's own path (Queuer,
// BatchExtender, Transferer, Atomic) have no such fallback: their errors are
// the call's errors (an error matching no sentinel counts as an unknown
// outcome), so declare them only when the store can always serve them.
//
// A store package registers its URL scheme from init (Register), so that
// Open and the CLI's --store can open it. Package drivertest checks a store
// against these contracts.
//
// Start with Mutex and Model, then the optional capabilities; package
// memstore is the reference implementation, and etcdstore the template for
// a store in a module of its own. The repository's README, section "Writing
// a store", walks through a store and its conformance test.
//
// # Rules for every method
//
//   - One attempt per call: no retries, sleeps or goroutines left running
//     (a Queuer waits, but only within its call). The client owns waiting,
//     backoff and renewal.
//   - Methods are safe for concurrent use and honour ctx.
//   - Keys and tokens arrive already validated (ValidateKey); tokens
//     are secrets: never log them.
//   - A definite answer is a true one. ErrNotHeld means the call changed and
//     wrote nothing, also when the store's client resent a command whose
//     reply was lost. A store that cannot tell returns an error that matches
//     none of this package's sentinels (outcome unknown); the client treats
//     it as ErrUnavailable and assumes the call may have been applied.
//   - Errors that retrying cannot fix (permissions, authentication, an
//     unknown command, a value at a key that is not a lock) match
//     ErrRefused. The client stops waiting at once on them.
package driver
