package driver

import (
	"context"
	"fmt"
	"time"
)

// Semaphore is the counting primitive: at most N holdings' worth of permits
// of a key out at once, where N (the limit) is stored with the key by the
// call that finds no permit out. Each holding is a token's lease of its own:
// k permits, a fence and an expiry on the store's clock, extended and
// released on its own. It is a Store: its Model declares the time model of
// the holdings' leases.
//
// Rules, besides the ones in the package documentation (checked by package
// drivertest):
//
//   - Never more than the limit: the permits of the live holdings of a key
//     add up to at most its limit, whatever the callers and clients.
//   - The limit is the key's, not the caller's: while any permit of key is
//     out, AcquirePermits with another n changes nothing and returns a
//     *LimitMismatchError (matching ErrInvalid). Once none is out, the next
//     acquisition stores its own n.
//   - k permits are taken all at once or not at all: a refused
//     AcquirePermits leaves no permit taken. Callers are not ordered: a
//     caller of k > 1 can lose to later single-permit callers (reserving
//     permits for a waiter is still to come).
//   - Each holding expires on its own: when a holding's expiry passes (on
//     the store's clock) its permits come back, whatever the other holders
//     do; ExtendPermits by one token changes no other holding's expiry.
//   - Every new holding of a key gets a fence strictly greater than every
//     earlier holding's of that key (the store documents its limits, as
//     for Mutex).
//   - A token holds a key at most once. AcquirePermits by a token that
//     already holds key with the same k is a re-entry without a count: it
//     returns the holding's grant (same fence) and sets its expiry to the
//     later of the current one and ttl from now, so that a resent command
//     is harmless; with another k it changes nothing and returns an error
//     matching ErrInvalid.
//   - ExtendPermits and ReleasePermits by a token that holds no permit of
//     key change nothing and return NotHeld(false) (ErrExpired): a
//     semaphore has no single owner to report as ErrTaken.
//   - Invalid arguments (a key ValidateKey refuses, n < 1, k < 1, k > n,
//     ttl <= 0) change nothing and return an error matching ErrInvalid;
//     stores check them before any I/O (ValidatePermits).
//   - Per-key state is bounded: once every holding of a key has ended and
//     the store's documented retention has passed, nothing of it is left.
//
// Semaphore keys are a namespace of their own: key "k" of a Semaphore and
// key "k" of a Mutex of the same store are different things.
type Semaphore interface {
	Store

	// AcquirePermits gives token k of key's permits for ttl if k are free,
	// storing n as key's limit if no permit is out. If fewer than k are
	// free it returns a *PermitsTakenError and changes nothing; if key's
	// stored limit is not n (while permits are out), a *LimitMismatchError.
	// A ctx already done makes it fail, changing nothing. An error matching
	// no sentinel means the outcome is unknown (token may hold the
	// permits).
	AcquirePermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) (PermitGrant, error)

	// ExtendPermits sets the expiry of token's holding of key to ttl from
	// now (shorter or longer: the store follows the latest call), leaving
	// every other holding's expiry as it was. If token holds no permit of
	// key it changes nothing and returns NotHeld(false). An error matching
	// no sentinel means the expiry may or may not have been set.
	ExtendPermits(ctx context.Context, key, token string, ttl time.Duration) (PermitGrant, error)

	// ReleasePermits gives token's permits of key back and wakes the key's
	// waiters (PermitNotifier). If token holds no permit of key it changes
	// nothing and returns NotHeld(false); a resent release that already ran
	// answers nil. An error matching no sentinel means the permits may or
	// may not have been given back.
	ReleasePermits(ctx context.Context, key, token string) error
}

// PermitGrant describes a successful AcquirePermits or ExtendPermits.
type PermitGrant struct {
	// Fence is the holding's fencing token: strictly greater than any
	// earlier holding's of the key, unchanged by extension.
	Fence uint64
	// Permits is how many permits the holding has (the k it was taken
	// with).
	Permits int
	// Used is how many permits of the key were out, all holdings counted
	// (this one included), right after the call.
	Used int
	// TTL is how long, counted from the moment the call started, the store
	// keeps the holding at least: the requested ttl unless the store had to
	// shorten it.
	TTL time.Duration
}

// PermitsTakenError is what AcquirePermits returns when fewer than the k
// permits asked for are free. It matches ErrNotAcquired.
type PermitsTakenError struct {
	// Used is how many permits are out; Limit is the key's stored limit.
	Used, Limit int
	// Remaining is the time until the earliest live holding expires as the
	// store saw it (when at least one permit comes back, unless released
	// sooner), or negative if the store does not know.
	Remaining time.Duration
}

// Error says how many permits are out and when the first comes back.
func (e *PermitsTakenError) Error() string {
	if e.Remaining < 0 {
		return fmt.Sprintf("%s: %d of %d permits out", ErrNotAcquired, e.Used, e.Limit)
	}
	return fmt.Sprintf("%s: %d of %d permits out; the earliest lease ends in %v", ErrNotAcquired, e.Used, e.Limit, e.Remaining.Round(time.Millisecond))
}

// Is reports whether target is ErrNotAcquired.
func (e *PermitsTakenError) Is(target error) bool { return target == ErrNotAcquired }

// LimitMismatchError is what AcquirePermits returns when the caller's n is
// not the limit stored with the key while permits are out. It matches
// ErrInvalid: nothing was changed.
type LimitMismatchError struct {
	// Stored is the key's limit; Asked is the n of the call.
	Stored, Asked int
}

// Error names both limits.
func (e *LimitMismatchError) Error() string {
	return fmt.Sprintf("%s: the semaphore has %d permits while they are out, asked with %d", ErrInvalid, e.Stored, e.Asked)
}

// Is reports whether target is ErrInvalid.
func (e *LimitMismatchError) Is(target error) bool { return target == ErrInvalid }

// ValidatePermits reports whether the arguments of an AcquirePermits are
// acceptable: key as ValidateKey, 1 <= k <= n and ttl > 0. The error matches
// ErrInvalid.
func ValidatePermits(key string, n, k int, ttl time.Duration) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	switch {
	case n < 1:
		return fmt.Errorf("%w: a semaphore needs at least 1 permit, not %d", ErrInvalid, n)
	case k < 1 || k > n:
		return fmt.Errorf("%w: %d permits asked of %d: want 1 to %d", ErrInvalid, k, n, n)
	case ttl <= 0:
		return fmt.Errorf("%w: ttl %v: want > 0", ErrInvalid, ttl)
	}
	return nil
}

// PermitNotifier wakes waiters for permits when a holding of a key is
// released: the Notifier of Semaphore keys.
//
// Absent, or when SubscribePermits returns any error: waiters retry with
// backoff, capped by PermitsTakenError.Remaining when the store reports it.
type PermitNotifier interface {
	// SubscribePermits registers interest in releases of key's permits, as
	// Notifier.Subscribe does for a Mutex key: once it returns without
	// error, every later ReleasePermits of key sends a value on the channel
	// (values may be coalesced; the channel is never closed); acquisitions,
	// extensions and refused releases send nothing. cancel ends the
	// subscription and must be called exactly once. On error nothing stays
	// subscribed.
	SubscribePermits(ctx context.Context, key string) (ch <-chan struct{}, cancel func(), err error)
}

// PermitHolder is one holding of a Semaphore key, as PermitInspector reports
// it.
type PermitHolder struct {
	// Token is the holder's token (a secret: never log it), or "" where
	// the store keeps only a digest of tokens (etcdstore).
	Token string
	// Permits and Fence are the holding's k and fence.
	Permits int
	Fence   uint64
	// Remaining is the holding's remaining time to live.
	Remaining time.Duration
}

// PermitInfo is a Semaphore key's state.
type PermitInfo struct {
	// Limit is the stored limit (0 when no permit is out); Used the permits
	// out.
	Limit, Used int
	// Holders are the live holdings, in no particular order.
	Holders []PermitHolder
}

// PermitInspector reads a Semaphore key's state without changing it.
//
// Absent: the state of a semaphore cannot be shown.
type PermitInspector interface {
	// InspectPermits returns key's live holdings. A key with no permit out
	// is not an error. It changes nothing.
	InspectPermits(ctx context.Context, key string) (PermitInfo, error)
}

// PermitBatchExtender renews many semaphore holdings in one round trip (a
// pipeline), as BatchExtender does for Mutex keys. The renewal loop of a
// Semaphores uses it when a tick renews more than one holding.
//
// Absent: the renewal loop calls ExtendPermits once per holding.
type PermitBatchExtender interface {
	// ExtendPermitsBatch behaves like calling ExtendPermits for each
	// request, returning one result per request in the same order
	// (len(reqs) results, also when the round trip fails: then each result
	// carries the error). A result's Grant has the holding's Fence, its
	// permits as Holds and the TTL. It has no error of its own.
	ExtendPermitsBatch(ctx context.Context, reqs []ExtendRequest) []ExtendResult
}
