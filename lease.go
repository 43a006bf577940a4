package dlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/lease"
)

// Lease is a held lock. It is safe for concurrent use. Its identity (key,
// token, fence, hold count) never changes; its validity follows each renewal
// and Extend until it is released or lost.
//
// A Lease is valid until ValidUntil, measured on the local monotonic clock
// and already reduced by the time the acquisition (or the extension that set
// the key's expiry last) took and by clock drift. Past that point another
// owner may hold the lock. Done is closed when the lease ends, and Err says
// why.
//
// A lease that is not extended in time is lost by a timer on its Clock armed
// a margin before ValidUntil: 5 ms, or a tenth of the TTL if that is less.
// Done is therefore closed by ValidUntil unless the process goes unscheduled
// for longer than the margin (a long GC pause, an overloaded machine), in
// which case it is closed late by the excess; from ValidUntil on, Err and
// Remaining report the loss whether or not the timer has run.
type Lease struct {
	identity
	mu        sync.Mutex
	validity             // guarded by mu
	releasing            // guarded by mu
	renewal   lease.Slot // place in the renewal queue; guarded by the renewer's mutex
	data
}

// identity is what a lease is: it never changes.
type identity struct {
	c          *Client
	key, token string
	fence      uint64
	holds      int32
	// owned is set when the token is an explicit Owner's, shared by every
	// holding that owner takes of the key: a lost lease then sends no
	// release (see releaseLost).
	owned bool
	ttl   time.Duration // as acquired: bounds releases made on the caller's behalf
}

// validity is how long the lease lasts and the signal of its end: the
// expiry timer, the serialisation of the calls that set the key's expiry,
// and the loss hooks. Guarded by Lease.mu.
type validity struct {
	clock Clock
	// calling is set while a store call that sets the key's expiry (Extend or
	// a renewal) is under way: such calls are serialised, so that the
	// validity always follows the expiry applied last in the store.
	calling bool
	// freed is set once the ended lease's hold was given back to the store
	// (or the attempt made), so that releasing a lost lease twice sends one
	// release.
	freed      bool
	nextHook   int32
	callDone   chan struct{} // made by an Extend waiting for the call under way; closed when it ends
	done       chan struct{} // made on first use by Done; closed when the lease ends
	validUntil time.Time
	curTTL     time.Duration // TTL of the expiry set last (Extend or renewal); renewal asks for it
	err        error         // nil while held
	expiry     Timer
	renewErr   error // last failed renewal or Extend, reported as the cause on expiry
	hooks      map[int32]func(error)
}

// releasing is the lease's part in releases and local handoff. Guarded by
// Lease.mu.
type releasing struct {
	// slot is the key's local queue place this lease holds (nil for owners
	// that bypass the queue); it passes on when the lease ends.
	slot *keyQueue
}

// data is what the store read with the grant (WithRead).
type data struct {
	read *grantRead // nil if nothing was read
}

// grantRead is a resource read with the grant: its value, and its name
// (Commit writes there).
type grantRead struct {
	driver.Value
	resource string
}

var errReleased = fmt.Errorf("%w: lease released", ErrNotHeld)

func (c *Client) newLease(key, token string, owned bool, g driver.Grant, cfg config, validUntil time.Time, slot *keyQueue, rd *grantRead) *Lease {
	l := &Lease{
		identity:  identity{c: c, key: key, token: token, fence: g.Fence, holds: int32(g.Holds), owned: owned, ttl: cfg.ttl},
		validity:  validity{clock: cfg.clock, validUntil: validUntil, curTTL: cfg.ttl},
		releasing: releasing{slot: slot},
		renewal:   lease.NewSlot(),
		data:      data{read: rd},
	}
	if slot != nil {
		c.queues.held(slot, l)
	}
	l.mu.Lock()
	l.armExpiry()
	l.mu.Unlock()
	if cfg.renew {
		c.renewer.Add(l.renewable(), l.ttl)
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
	if l.read == nil {
		return "", false
	}
	return l.read.Data, l.read.Found
}

// ValueRead reports whether the store read the WithRead resource with the
// grant. It is false when the call had no WithRead or the store cannot read
// with a grant; the caller must then read the resource itself.
func (l *Lease) ValueRead() bool { return l.read != nil }

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
	if l.err != nil || l.clock.Now().Before(l.validUntil) {
		defer l.mu.Unlock()
		return l.err
	}
	l.mu.Unlock()
	l.expire() // the timer is late, but the validity is over all the same
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// ValidUntil returns the local monotonic time up to which the lock is held.
// It follows the expiry set in the store last, by Extend or by a renewal: a
// shorter Extend moves it back, even one that failed (it may have been
// applied).
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

// Release gives up one hold of the lock; the lock is free once every hold of
// its owner is released. Renewal stops before the store is asked, so it never
// outlives the release.
//
// If the lock had already been lost, Release returns an error matching ErrLost:
// the work done under it may not have been protected. It still asks the store
// first, once, to remove this lease's hold if its token still has it (an
// extension applied after the loss may keep the key held); that request is
// best effort, bounded by ctx, and its outcome is not reported; it is not
// sent for a lease taken as an explicit Owner (ContextWithOwner), whose
// token a newer holding of the same owner may carry. A lost lease never
// hands the lock to a local waiter. If the store cannot be
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
// error matching ErrLost, after the same best-effort release as Release. If the store cannot be reached, it returns an error
// matching ErrUnavailable, and whether the write happened is unknown; the
// lease is released locally all the same, as with Release.
func (l *Lease) Commit(ctx context.Context, value string) error {
	if l == nil {
		return fmt.Errorf("%w: nil lease", ErrNotHeld)
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	if l.read == nil || l.c.caps.atomic == nil {
		return invalidf("Commit needs a lease granted WithRead by a store that reads and writes with the lock (Lease.ValueRead is false)")
	}
	return l.release(ctx, &write{resource: l.read.resource, value: value})
}

// write is the resource update Commit folds into the release.
type write struct {
	resource, value string
}

// release ends the lease and frees (or hands off) the lock in the store,
// applying w with it if not nil.
func (l *Lease) release(ctx context.Context, w *write) error {
	l.mu.Lock()
	if l.err == nil && !l.clock.Now().Before(l.validUntil) {
		l.mu.Unlock()
		l.expire() // the timer is late; a lease past its validity must not hand off
		l.mu.Lock()
	}
	if l.err != nil {
		err := l.err
		send := err != errReleased && !l.freed
		l.freed = true
		l.mu.Unlock()
		if send {
			l.releaseLost(ctx)
		}
		return err
	}
	l.err = errReleased
	l.expiry.Stop()
	l.end()
	l.mu.Unlock()
	l.c.renewer.Remove(l.renewable())
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

// releaseLost gives back the hold of a lease that was lost. A lease lost to
// its local clock may still hold the key in the store (an extension whose
// reply came too late, or not at all); the release is token-checked, so it
// cannot touch another owner's holding, and writes nothing. The local queue
// slot was left without handoff when the lease was lost.
//
// An explicit Owner's token is shared by every holding the owner takes: the
// holding this lease belonged to may have ended and the owner taken a new
// one since, which a token-checked release would strip. So a lost lease of
// an Owner sends nothing; a late-applied extension of it keeps the key
// until that expiry.
func (l *Lease) releaseLost(ctx context.Context) {
	if l.owned {
		return
	}
	_ = l.c.store.Release(ctx, l.key, l.token) // best effort: the key expires anyway
}

// expiryMargin is how long before ValidUntil the expiry timer is armed, so
// that Done is closed by ValidUntil although a timer runs a little late.
func expiryMargin(ttl time.Duration) time.Duration {
	return min(5*time.Millisecond, ttl/10)
}

// armExpiry (re)arms the expiry timer for the current validity. Called with
// l.mu held.
func (l *Lease) armExpiry() {
	if l.expiry != nil {
		l.expiry.Stop()
	}
	d := l.validUntil.Sub(l.clock.Now()) - expiryMargin(l.curTTL)
	l.expiry = l.clock.AfterFunc(d, l.expire)
}

// expire runs when the validity timer fires (or Err finds the validity
// over); an extension may have moved the deadline since the timer was set.
func (l *Lease) expire() {
	l.mu.Lock()
	if l.err != nil || l.clock.Now().Before(l.validUntil.Add(-expiryMargin(l.curTTL))) {
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
	l.c.renewer.Remove(l.renewable())
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
