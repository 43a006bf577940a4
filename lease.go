package dlock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Lease is a held lock. It is safe for concurrent use. Its identity (key,
// token, fence, hold count) never changes; its validity moves forward with
// each renewal until it is released or lost.
//
// A Lease is valid until ValidUntil, measured on the local monotonic clock
// and already reduced by the time the acquisition took and by clock drift.
// Past that point another owner may hold the lock. Done is closed when the
// lease ends, and Err says why.
type Lease struct {
	c          *Client
	key, token string
	fence      uint64
	holds      int32
	nextHook   int32 // guarded by mu; next to holds so the pair packs in 8 bytes
	ttl        time.Duration
	clock      Clock

	mu         sync.Mutex
	done       chan struct{} // made on first use by Done; closed when the lease ends
	validUntil time.Time
	err        error // nil while held
	expiry     Timer
	renewErr   error // last failed renewal, reported as the cause on expiry
	hooks      map[int32]func(error)

	// slot is the key's local queue place this lease holds (nil for owners
	// that bypass the queue); it passes on when the lease ends.
	slot *keyQueue

	// value is the resource read with the grant (WithRead), nil if none;
	// resource names it (Commit writes there).
	value    *Value
	resource *string

	// Renewal queue bookkeeping, guarded by the renewer's mutex.
	next  time.Time
	index int
}

var errReleased = fmt.Errorf("%w: lease released", ErrNotHeld)

func (c *Client) newLease(key, token string, g Grant, cfg config, validUntil time.Time, slot *keyQueue, v *Value) *Lease {
	l := &Lease{
		c: c, key: key, token: token, fence: g.Fence, holds: int32(g.Holds), ttl: cfg.ttl,
		clock: cfg.clock, validUntil: validUntil, index: -1, slot: slot, value: v,
	}
	if v != nil {
		l.resource = cfg.read
	}
	if slot != nil {
		c.queues.held(slot, l)
	}
	l.mu.Lock()
	l.expiry = l.clock.AfterFunc(validUntil.Sub(l.clock.Now()), l.expire)
	l.mu.Unlock()
	if cfg.renew {
		c.renewer.add(l)
	}
	return l
}

// Key returns the locked key.
func (l *Lease) Key() string { return l.key }

// Token returns the owner token that holds the lock. It is a bearer secret:
// whoever knows it can release the lock. Do not log it.
func (l *Lease) Token() string { return l.token }

// Fence returns the fencing token: strictly greater than that of every earlier
// holding of the key, and the same for re-entrant holds. Pass it to the
// protected resource and have it reject lower values (see FenceGate).
func (l *Lease) Fence() uint64 { return l.fence }

// Holds returns the hold count right after this acquisition: 1 for a first
// acquisition, more for a re-entrant one.
func (l *Lease) Holds() int { return int(l.holds) }

// Value returns the value the resource key named with WithRead had when this
// lease was granted, read by the store atomically with the grant. found is
// false if the key did not exist, and also if nothing was read: the call had
// no WithRead, or the store is not a GrantReader (ValueRead tells these
// apart). The value is not refreshed: writes made after the grant, including
// the holder's own, are not reflected.
func (l *Lease) Value() (value string, found bool) {
	if l.value == nil {
		return "", false
	}
	return l.value.Data, l.value.Found
}

// ValueRead reports whether the store read the WithRead resource with the
// grant. It is false when the call had no WithRead or the store cannot read
// with a grant; the caller must then read the resource itself.
func (l *Lease) ValueRead() bool { return l.value != nil }

// Done returns a channel closed when the lease ends: released, or lost.
func (l *Lease) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		if l.err != nil {
			return closedChan
		}
		l.done = make(chan struct{})
	}
	return l.done
}

// closedChan is the Done channel of a lease that ended before anyone asked.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// end closes done if it was made. Called with l.mu held, once.
func (l *Lease) end() {
	if l.done != nil {
		close(l.done)
	}
	l.c.untrack(l) // Client.Close has nothing left to release
}

// Err returns nil while the lease is held, an error matching ErrNotHeld once
// it was released, and one matching ErrLost (and its cause: ErrExpired,
// ErrTaken or ErrUnavailable) once it was lost.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// ValidUntil returns the local monotonic time up to which the lock is held.
func (l *Lease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// Remaining returns how much validity is left, or zero once the lease ended.
func (l *Lease) Remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0
	}
	return max(0, l.validUntil.Sub(l.clock.Now()))
}

// Extend resets the lease to ttl from now. It is needed only for leases taken
// with WithTTL; automatically renewed leases extend themselves.
//
// If the store says the lock is no longer held, the lease is lost and Extend
// returns an error matching ErrLost. If the store cannot be reached, Extend
// returns an error matching ErrUnavailable and the lease keeps its current
// validity. Invalid ttl values return ErrInvalid before any I/O.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	cfg := config{ttl: ttl, wait: -1, backoff: l.c.cfg.backoff, clock: l.clock}
	if err := cfg.validate(); err != nil {
		return err
	}
	if err := l.Err(); err != nil {
		return err
	}
	start := l.clock.Now()
	g, err := l.c.store.Extend(ctx, l.key, l.token, ttl)
	if err = classify(err); err != nil {
		if isNotHeld(err) {
			return l.lose(err)
		}
		return err
	}
	l.extended(start.Add(g.TTL - drift(ttl)))
	return nil
}

// Release gives up one hold of the lock; the lock is free once every hold of
// its owner is released. Renewal stops before the store is asked, so it never
// outlives the release.
//
// If the lock had already been lost, Release returns an error matching ErrLost:
// the work done under it may not have been protected. If the store cannot be
// reached, it returns an error matching ErrUnavailable; the lease is released
// locally all the same and the key expires at the end of its TTL. Releasing
// twice returns an error matching ErrNotHeld.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("%w: nil lease", ErrNotHeld)
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	return l.release(ctx, nil)
}

// Commit writes value to the resource named with WithRead and releases the
// lease (one hold of it), in one atomic step and one round trip: the write
// is made only if this lease still holds the lock, so a holder that lost the
// lock cannot overwrite what its successor wrote. If another waiter of the
// same Client is queued for the key, the lock passes to it in the same step,
// and a waiter that reads the same resource gets value.
//
// Commit needs a lease whose ValueRead is true (WithRead, with a store that
// reads with the grant and also writes with the release, such as
// redisstore). Otherwise, or if ctx is nil, it returns an error matching
// ErrInvalid before any I/O and the lease stays held: write the resource and
// Release yourself.
//
// If the lock had already been lost, Commit writes nothing and returns an
// error matching ErrLost. If the store cannot be reached, it returns an error
// matching ErrUnavailable, and whether the write happened is unknown; the
// lease is released locally all the same, as with Release.
func (l *Lease) Commit(ctx context.Context, value string) error {
	if l == nil {
		return fmt.Errorf("%w: nil lease", ErrNotHeld)
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	if l.resource == nil || l.c.committer == nil {
		return invalidf("Commit needs a lease granted WithRead by a store that reads and writes with the lock (Lease.ValueRead is false)")
	}
	return l.release(ctx, &write{resource: *l.resource, value: value})
}

// write is the resource update Commit folds into the release.
type write struct {
	resource, value string
}

// release ends the lease and frees (or hands off) the lock in the store,
// applying w with it if not nil.
func (l *Lease) release(ctx context.Context, w *write) error {
	l.mu.Lock()
	if l.err != nil {
		defer l.mu.Unlock()
		return l.err
	}
	l.err = errReleased
	l.expiry.Stop()
	l.end()
	l.mu.Unlock()
	l.c.renewer.remove(l)
	if l.slot != nil {
		if handled, err := l.c.handoff(ctx, l, w); handled {
			return err
		}
	}
	err := l.c.storeRelease(ctx, l.key, l.token, w)
	if l.slot != nil {
		l.c.queues.leave(l.key, l.slot, true) // after the store freed the key
	}
	if isNotHeld(err) {
		return lostError(l.key, err)
	}
	return err
}

// extended moves the validity forward after a successful renewal.
func (l *Lease) extended(validUntil time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewErr = nil
	if l.err != nil || !validUntil.After(l.validUntil) {
		return
	}
	l.validUntil = validUntil
	l.expiry.Stop()
	l.expiry = l.clock.AfterFunc(validUntil.Sub(l.clock.Now()), l.expire)
}

func (l *Lease) renewFailed(err error) {
	l.mu.Lock()
	l.renewErr = err
	l.mu.Unlock()
}

// expire runs when the validity timer fires; a renewal may have moved the
// deadline since the timer was set.
func (l *Lease) expire() {
	l.mu.Lock()
	if l.err != nil || l.clock.Now().Before(l.validUntil) {
		l.mu.Unlock()
		return
	}
	cause := ErrExpired
	if l.renewErr != nil {
		cause = fmt.Errorf("%w after renewal failed: %w", ErrExpired, l.renewErr)
	}
	l.mu.Unlock()
	l.lose(cause)
}

// lose ends the lease with cause, runs the loss hooks and returns the error.
func (l *Lease) lose(cause error) error {
	l.mu.Lock()
	if l.err != nil {
		defer l.mu.Unlock()
		return l.err
	}
	l.err = lostError(l.key, cause)
	l.expiry.Stop()
	l.end()
	hooks := l.hooks
	l.hooks = nil
	err := l.err
	l.mu.Unlock()
	l.c.renewer.remove(l)
	if l.slot != nil {
		l.c.queues.leave(l.key, l.slot, false)
	}
	for _, h := range hooks {
		h(err)
	}
	return err
}

// onLost registers f to run once if the lease is lost (immediately if it was
// lost already) and returns a function that unregisters it.
func (l *Lease) onLost(f func(error)) (stop func()) {
	l.mu.Lock()
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		if err != errReleased {
			f(err)
		}
		return func() {}
	}
	if l.hooks == nil {
		l.hooks = make(map[int32]func(error))
	}
	id := l.nextHook
	l.nextHook++
	l.hooks[id] = f
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.hooks, id)
		l.mu.Unlock()
	}
}
