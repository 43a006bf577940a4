// Package driver holds the contracts between dlock's generic machinery and
// the stores that keep lock state on a server. It is for store authors; users
// of locks need only package dlock and a store's constructor.
//
// The split follows gocloud.dev's driver packages: this package has only
// interfaces, plain data types and the errors both sides share. A store
// implements one interface per primitive (Mutex today) and any number of
// optional capabilities. The client finds each capability once, when it is
// created, through As, which also looks through wrappers that implement
// Unwrapper. Every capability documents what the client does when a store
// does not have it. A store that has a capability's method but cannot serve
// it at the moment of the call returns an error matching
// errors.ErrUnsupported; the client then falls back as if it were absent.
//
// Package drivertest checks a store against these contracts.
//
// # Rules for every method
//
//   - One attempt per call: no retries, sleeps or goroutines left running
//     (a Queuer waits, but only within its call). The client owns waiting,
//     backoff and renewal.
//   - Methods are safe for concurrent use and honour ctx.
//   - Keys and tokens arrive already validated (dlock.ValidateKey); tokens
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
