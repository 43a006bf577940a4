package dlock

import (
	"context"
	"time"
)

// Store records lock ownership on a server. It is the seam between the
// generic machinery in this package (waiting, backoff, renewal, lost-lock
// signals, validity) and one kind of server.
//
// The rules every implementation follows, checked by package storetest:
//
//   - One attempt per call: no retries, sleeps or goroutines left running.
//     Callers own waiting and renewal.
//   - Methods are safe for concurrent use and honour ctx.
//   - Ownership is by token. Acquire by the token that already holds a key
//     re-enters: the hold count goes up, the fence stays the same, and the
//     expiry becomes the later of the current one and ttl from now: a
//     re-entry never shortens a holding (other leases of the same holding
//     count on its expiry).
//   - Extend sets the expiry to ttl from now, shorter or longer: the store
//     follows the latest Extend.
//   - Every acquisition of a free key gets a fence strictly greater than any
//     earlier fence of that key (as far as the store can promise; a store
//     documents its limits).
//   - Per-key state is bounded: once a key is released (or expired) and the
//     store's documented retention has passed, nothing of it is left, so
//     locking ever new keys does not grow the store without bound.
//   - A definite answer is a true one: ErrNotHeld means the call changed and
//     wrote nothing, also when the store's client resent a command whose
//     reply was lost. A store that cannot tell returns an error that is not
//     a sentinel (outcome unknown, treated as ErrUnavailable).
//   - Extend and Release by a token that does not hold the key change nothing
//     and return an error matching ErrNotHeld and either ErrExpired (no
//     holder) or ErrTaken (another holder). Extend never re-creates a key.
//   - Errors that retrying cannot fix (permissions, authentication, an
//     unknown command, a value at the key that is not a lock) match
//     ErrRefused. Errors other than those sentinels mean the store could not
//     be reached or failed; the caller treats them as ErrUnavailable.
//
// Keys and tokens reach the store already validated (see ValidateKey).
type Store interface {
	// Acquire makes token the holder of key for ttl if key is free, or adds a
	// hold if token already holds it (the expiry becomes the later of the
	// current one and ttl from now, never earlier). If another token holds
	// key, it returns a *ContendedError and changes nothing.
	Acquire(ctx context.Context, key, token string, ttl time.Duration) (Grant, error)

	// Extend sets the expiry of key to ttl from now (shorter or longer) if
	// token holds it.
	Extend(ctx context.Context, key, token string, ttl time.Duration) (Grant, error)

	// Release removes one hold of token on key; the key is freed, and waiters
	// notified, when the count reaches zero.
	Release(ctx context.Context, key, token string) error
}

// Grant describes a successful Acquire or Extend.
type Grant struct {
	// Fence is the fencing token of the current holding: strictly greater than
	// any earlier holding's, unchanged by re-entry and extension.
	Fence uint64
	// Holds is the hold count after the call (1 for a first acquisition).
	Holds int
	// TTL is how long, counted from the moment the call started, the store
	// keeps the key for token at least. Stores return the requested ttl
	// unless they had to shorten it (Redlock subtracts its own elapsed time);
	// for a re-entry the holding may last longer than TTL (an expiry is
	// never shortened by a re-entry), never shorter.
	TTL time.Duration
}

// Notifier is an optional Store capability: waking waiters when a key is
// released instead of polling.
type Notifier interface {
	// Subscribe registers interest in releases of key. Once it returns
	// without error, every later release of key sends a value on the channel
	// (values may be coalesced; the channel is never closed). cancel ends the
	// subscription and must be called exactly once.
	Subscribe(ctx context.Context, key string) (ch <-chan struct{}, cancel func(), err error)
}

// ExtendRequest is one item of a batched renewal.
type ExtendRequest struct {
	Key, Token string
	TTL        time.Duration
}

// ExtendResult is the outcome of one ExtendRequest.
type ExtendResult struct {
	Grant Grant
	Err   error
}

// BatchExtender is an optional Store capability used by the renewal loop to
// renew many leases in one round trip (a pipeline).
type BatchExtender interface {
	// ExtendBatch behaves like calling Extend for each request, returning one
	// result per request in the same order.
	ExtendBatch(ctx context.Context, reqs []ExtendRequest) []ExtendResult
}

// Info describes the state of one key, as reported by an Inspector.
type Info struct {
	// Held reports whether some owner holds the key.
	Held bool
	// Token is the holder's owner token (a secret: abbreviate it for display).
	Token string
	// Holds is the holder's hold count.
	Holds int
	// Remaining is the holder's remaining time to live.
	Remaining time.Duration
	// Fence is the last fence issued for the key (held or not); 0 if none is
	// known: never locked, or released longer ago than the store keeps
	// state for (its retention; memstore keeps none).
	Fence uint64
}

// Inspector is an optional Store capability used by tools such as
// `dlock status`: it reads a key's state without changing it.
type Inspector interface {
	Inspect(ctx context.Context, key string) (Info, error)
}

// Transferer is an optional Store capability used for local handoff: when a
// holder releases a key that another waiter of the same Client is queued
// for, the Client passes the lock to the waiter in one call instead of a
// release and an acquire. The transfer is a new holding: a new owner token
// and a new fence, so fencing tokens stay strictly increasing per holding.
type Transferer interface {
	// Transfer makes token to the holder of key with one hold, a fence
	// greater than every earlier one and an expiry of ttl, if token from
	// holds key with exactly one hold. If from does not hold key it changes
	// nothing and returns an error matching ErrNotHeld (and ErrExpired or
	// ErrTaken); if from holds it more than once (re-entered) it changes
	// nothing and returns an error matching ErrInvalid.
	Transfer(ctx context.Context, key, from, to string, ttl time.Duration) (Grant, error)
}

// GrantReader is an optional Store capability behind WithRead: acquiring
// (or receiving by transfer) a lock and reading one caller-named resource
// key in the same atomic step and round trip, so that the first read of the
// protected value costs nothing extra. The resource key is the caller's own
// data, named verbatim (no prefix); the store reads it, never writes it.
//
// The methods behave exactly as Acquire and Transfer, plus the read. A
// failed or contended call reads nothing. A store that cannot honour a
// resource name (for example a Redis Cluster key in another slot than the
// lock's) returns an error matching ErrInvalid and changes nothing.
type GrantReader interface {
	// AcquireRead is Acquire, also returning resource's value at the moment
	// of the grant (including a re-entrant one).
	AcquireRead(ctx context.Context, key, token string, ttl time.Duration, resource string) (Grant, Value, error)
	// TransferRead is Transferer.Transfer, also returning resource's value
	// at the moment of the transfer.
	TransferRead(ctx context.Context, key, from, to string, ttl time.Duration, resource string) (Grant, Value, error)
}

// Value is a resource key's value read by a GrantReader.
type Value struct {
	// Data is the value; empty when the key did not exist.
	Data string
	// Found reports whether the key existed.
	Found bool
}

// Committer is an optional Store capability behind Lease.Commit: writing the
// caller's resource key in the same atomic step and round trip as the
// release (or the local handoff) of the lock, and only while the token still
// holds it, so that a holder that has lost the lock cannot write. Like a
// GrantReader, it names the resource verbatim and refuses a resource it
// cannot reach with an error matching ErrInvalid, changing nothing.
type Committer interface {
	// ReleaseWrite sets resource to value and removes one hold of token on
	// key, as Release does, if token holds key. Otherwise it writes nothing,
	// changes nothing and returns an error matching ErrNotHeld (and
	// ErrExpired or ErrTaken).
	ReleaseWrite(ctx context.Context, key, token, resource, value string) error
	// TransferWrite sets resource to value and hands key from one token to
	// another as Transferer.Transfer does; when Transfer would refuse it
	// writes nothing and returns the same errors. If read is not empty, it
	// also returns read's value after the write, as TransferRead does.
	TransferWrite(ctx context.Context, key, from, to string, ttl time.Duration, resource, value, read string) (Grant, Value, error)
}
