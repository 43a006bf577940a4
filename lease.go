package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
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
	v         lease.Validity[Timer] // validity and the signal of its end (the lease engine)
	releasing                       // guarded by v's mutex
	renewal   lease.Slot            // place in the renewal queue; guarded by the renewer's mutex
	// rec is the record of the holdings that share this lease's store
	// record (record.go): set at the grant for an explicit Owner's lease,
	// and when a Do's lease is re-entered through its context; then never
	// changes.
	rec atomic.Pointer[record]
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
	// watch is the Observer of the call that made the lease and when it
	// was granted; nil if none (observe.go).
	watch *watch
}

// releasing is the lease's part in releases and local handoff.
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

var errReleased = lease.Released

// newLease makes the lease of a grant. rec is the owner's record if the
// token is an explicit Owner's (nil otherwise): the lease joins it before
// its expiry timer is armed, so that its end always finds it there.
func (c *Client) newLease(key, token string, rec *record, g driver.Grant, cfg config, validUntil time.Time, slot *keyQueue, rd *grantRead) *Lease {
	l := &Lease{
		identity:  identity{c: c, key: key, token: token, fence: g.Fence, holds: int32(g.Holds), owned: rec != nil, ttl: cfg.ttl, watch: newWatch(cfg)},
		releasing: releasing{slot: slot},
		renewal:   lease.NewSlot(),
		data:      data{read: rd},
	}
	if slot != nil {
		c.queues.held(slot, l)
	}
	if rec != nil {
		l.rec.Store(rec)
		c.joined(rec, l)
	}
	l.v.Init(cfg.clock, validUntil, cfg.ttl, l.holder())
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

// Value returns the WithRead resource's value at the grant, read atomically
// with it; found is false if the key did not exist or nothing was read
// (ValueRead tells these apart). Later writes, the holder's own included,
// are not reflected.
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
func (l *Lease) Done() <-chan struct{} { return l.v.Done() }

// Err returns nil while the lease is held, an error matching ErrNotHeld once
// it was released, and one matching ErrLost (and its cause: ErrExpired,
// ErrTaken or ErrUnavailable) once it was lost.
func (l *Lease) Err() error { return l.v.Err(l.holder()) }

// ValidUntil returns the local monotonic time up to which the lock is held.
// It follows the expiry this lease set in the store last, by Extend or by a
// renewal: a shorter Extend moves it back, even one that failed (it may have
// been applied). Another live holding of the same owner and key keeps the
// store's record longer (see Extend), not this lease's validity.
func (l *Lease) ValidUntil() time.Time { return l.v.ValidUntil() }

// Remaining returns how much validity is left, or zero once the lease ended.
func (l *Lease) Remaining() time.Duration { return l.v.Remaining() }

// Release gives up one hold of the lock (the lock is free once every hold of
// its owner is released) and stops renewal first. If the store did not
// confirm, it returns an error matching ErrUnavailable: the lease is released
// locally and the Client retries in the background. It returns ErrLost if the
// lock had been lost, ErrNotHeld if already released (or l is nil), and
// ErrInvalid for a nil ctx, leaving the lease held. More:
// docs/api.md#leaserelease.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("%w: nil lease", ErrNotHeld)
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	return l.release(ctx, nil)
}

// Commit writes value to the WithRead resource and releases one hold, in one
// atomic step, only while this lease still holds the lock. It returns
// ErrInvalid before any I/O, the lease still held, if ValueRead is false or
// ctx is nil; ErrLost, nothing written, if the lock was lost; ErrUnavailable,
// the write unknown and the lease released locally, if the store did not
// answer. More: docs/api.md#leasecommit.
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
	if err, first, back := l.v.Release(l.holder()); err != nil {
		releaseEnded(ctx, first, back, l.releaseLost)
		return err
	}
	l.c.renewer.Remove(l.renewable())
	// A lease that shares its record with an owner's holdings (a Do's lease
	// re-entered through its context) is not handed off: the record may keep
	// their holds, which a transfer would move or refuse; it is released, and
	// the record gives back what is left (record.go).
	if l.slot != nil && l.rec.Load() == nil {
		if handled, err := l.c.handoff(ctx, l, w); handled {
			return err
		}
	}
	err := l.c.storeRelease(ctx, l.key, l.token, w)
	if l.slot != nil {
		l.c.queues.leave(l.key, l.slot, true) // after the store freed the key
	}
	if isNotHeld(err) {
		l.settleRelease(true)
		l.observe(ctx, endEvent(err, false))
		return lostError(l.key, err)
	}
	back := l.settleRelease(err == nil)
	l.observe(ctx, endEvent(err, back))
	if back {
		return fmt.Errorf("%w (the release is retried in the background)", err)
	}
	return err
}

// settleRelease records the outcome of the lease's release in the store:
// confirmed, or not (no answer, or ctx ended first). An unconfirmed release
// is given back in the background (giveback.go), at once for a lease of its
// own token, and for an Owner's once its last live holding of the key
// ends (record.go). It reports whether a give-back will follow.
func (l *Lease) settleRelease(confirmed bool) bool {
	if rec := l.rec.Load(); rec != nil {
		how := leftReleased
		if !confirmed {
			how = leftUnconfirmed
		}
		l.c.left(rec, l, how)
		return !confirmed
	}
	if confirmed {
		return false
	}
	l.c.giveBack(l.key, l.token, 1, l.ttl, time.Time{}, nil)
	return true
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

// holder is a Lease as the lease engine sees its end (lease.Holder): a
// type of its own, so that those methods stay out of Lease's API.
type holder Lease

func (l *Lease) holder() *holder { return (*holder)(l) }

// LostError implements lease.Holder.
func (h *holder) LostError(cause error) error { return lostError(h.key, cause) }

// Ended implements lease.Holder: Client.Close has nothing left to release.
func (h *holder) Ended() { h.c.untrack((*Lease)(h)) }

// Lost implements lease.Holder: renewal stops and the local queue slot is
// left without handoff.
//
// A lease lost on the local clock may still hold the key in the store (an
// extension whose reply came too late, or none); on a session store the
// key is freed only with the session, which the Client's other leases may
// keep alive. So the hold is given back in the background, token-checked;
// an Owner's, once its last live holding of the key ended (record.go).
// Nothing is given back when the store said the token holds nothing, nor
// after Close, which releases its leases itself.
func (h *holder) Lost() {
	l := (*Lease)(h)
	l.c.renewer.Remove(l.renewable())
	if l.slot != nil {
		l.c.queues.leave(l.key, l.slot, false)
	}
	cause := l.v.Err(h)
	if l.watch != nil {
		l.observe(context.Background(), Event{Type: EventLost, Outcome: lossOutcome(cause), Err: cause})
	}
	gone := errors.Is(cause, ErrTaken) || errors.Is(cause, ErrNotHeld)
	closed := errors.Is(cause, errClosed)
	if rec := l.rec.Load(); rec != nil {
		switch {
		case gone:
			l.c.left(rec, l, leftReleased)
		case closed:
			l.c.left(rec, l, leftUnconfirmed)
		default:
			l.c.left(rec, l, leftExpired)
		}
		return
	}
	if gone || closed {
		return
	}
	if back := l.v.ClaimGiveBack(); back != nil {
		l.c.giveBack(l.key, l.token, 1, l.ttl, l.ValidUntil(), func(int) { close(back) })
	}
}

// Expire implements lease.Holder.
func (h *holder) Expire() { h.v.Expire(h) }

// lose ends the lease with cause, runs the loss hooks and returns the error.
func (l *Lease) lose(cause error) error { return l.v.Lose(l.holder(), cause) }

// onLost registers f to run once if the lease is lost (immediately if it was
// lost already) and returns a function that unregisters it.
func (l *Lease) onLost(f func(error)) (stop func()) { return l.v.OnLost(f) }
