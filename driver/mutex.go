package driver

import (
	"context"
	"time"
)

// Mutex is the primitive behind dlock.Client: an exclusive, re-entrant lock
// per key, owned by a token, with a fence per holding. It is a Store: its
// Model declares the time and liveness model of its leases.
//
// Rules, besides the ones in the package documentation (checked by package
// drivertest):
//
//   - Acquire by the token that already holds a key re-enters: the hold
//     count goes up, the fence stays the same, and the expiry becomes the
//     later of the current one and ttl from now: a re-entry never shortens a
//     holding.
//   - Extend sets the expiry to ttl from now, shorter or longer: the store
//     follows the latest Extend. Extend never re-creates a key.
//   - Every acquisition of a free key gets a fence strictly greater than any
//     earlier fence of that key (as far as the store can promise; a store
//     documents its limits).
//   - Per-key state is bounded: once a key is released (or expired) and the
//     store's documented retention has passed, nothing of it is left.
//   - Extend and Release by a token that does not hold the key change
//     nothing and return NotHeld(taken).
//
// On a session-based store (Model.Session) the ttl arguments carry the
// client's lease length, but the holding lasts as long as the store's
// session: Grant.TTL reports how long the session is certain to last,
// counted from the start of the call, and Extend renews the session (all of
// the store's holdings at once) and confirms the key is still held.
type Mutex interface {
	Store

	// Acquire makes token the holder of key for ttl if key is free, or adds a
	// hold if token already holds it. If another token holds key, it returns
	// a *ContendedError and changes nothing. A ctx already done makes it
	// fail, also changing nothing. Errors that retrying cannot fix match
	// ErrRefused; an error matching no sentinel means the outcome is
	// unknown (the key may be held for token).
	Acquire(ctx context.Context, key, token string, ttl time.Duration) (Grant, error)

	// Extend sets the expiry of key to ttl from now (shorter or longer) if
	// token holds it. Otherwise it changes nothing and returns
	// NotHeld(taken). Other errors are as for Acquire: an error matching no
	// sentinel means the expiry may or may not have been set.
	Extend(ctx context.Context, key, token string, ttl time.Duration) (Grant, error)

	// Release removes one hold of token on key; the key is freed, and waiters
	// notified, when the count reaches zero. If token does not hold key it
	// changes nothing and returns NotHeld(taken). Other errors are as for
	// Acquire: an error matching no sentinel means the hold may or may not
	// have been removed. A ctx already done makes it return at once an error
	// matching ctx.Err(), sending nothing and changing nothing, neither in
	// the store nor in the client: the hold stays, for a later Release with
	// a live ctx to remove.
	Release(ctx context.Context, key, token string) error
}

// Grant describes a successful Acquire, Extend or transfer.
type Grant struct {
	// Fence is the fencing token of the current holding: strictly greater than
	// any earlier holding's, unchanged by re-entry and extension.
	Fence uint64
	// Holds is the hold count after the call (1 for a first acquisition).
	Holds int
	// TTL is how long, counted from the moment the call started, the store
	// keeps the key for token at least. Per-key stores return the requested
	// ttl unless they had to shorten it (Redlock subtracts its own elapsed
	// time); session-based stores return how long their session is certain
	// to last. For a re-entry the holding may last longer, never shorter.
	TTL time.Duration
}
