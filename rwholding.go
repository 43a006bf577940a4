package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"example.com/dlock/driver"
)

// RWHolding is a read or write holding of a read-write lock key: a lease of
// its own, with a fence and a validity that follows each renewal and Extend
// until it is released or lost. It is safe for concurrent use.
//
// As for a Lease, the validity is measured on the local monotonic clock,
// reduced by the time the call that set the holding's expiry took and by
// clock drift; Done is closed a margin before ValidUntil if the holding was
// not extended in time, and Err says why it ended.
type RWHolding struct {
	member
	l    *RWLocks
	mode atomic.Int32 // a driver.RWMode
}

// newHolding makes the RWHolding of a grant, tracks it for Close and queues
// it for renewal if cfg says so. If Close has begun (and so may have missed
// it), it releases the grant instead, bounded by the lease, and returns
// ErrNotAcquired and ErrInvalid.
func (l *RWLocks) newHolding(ctx context.Context, key, token string, mode driver.RWMode, g driver.RWGrant, cfg config, validUntil time.Time) (*RWHolding, error) {
	h := &RWHolding{l: l}
	h.mode.Store(int32(mode))
	if err := l.adopt(ctx, &h.member, h, key, token, g.Fence, cfg, validUntil); err != nil {
		return nil, err
	}
	return h, nil
}

// eventKind implements famHolding: the holding's mode, read once
// Downgrade was called.
func (h *RWHolding) eventKind() Kind { return rwKind(h.Mode()) }

// rwKind is the Kind of the events of a holding of mode.
func rwKind(mode driver.RWMode) Kind {
	if mode == driver.RWWrite {
		return KindWrite
	}
	return KindRead
}

// grant implements famHolding and granted: a holding counts one.
func (h *RWHolding) grant() (uint64, int) { return h.fence, 1 }

// Key returns the read-write lock's key.
func (h *RWHolding) Key() string { return h.key }

// Mode returns driver.RWRead or driver.RWWrite: the holding's mode, read
// once Downgrade was called.
func (h *RWHolding) Mode() driver.RWMode { return driver.RWMode(h.mode.Load()) }

// Fence returns the holding's fencing token: a write holding's is greater
// than every earlier holding's of the key, a read holding's greater than
// every earlier write holding's. Downgrade keeps it. Pass it to the
// protected resource.
func (h *RWHolding) Fence() uint64 { return h.fence }

// Done returns a channel closed when the holding ends: released, or lost.
func (h *RWHolding) Done() <-chan struct{} { return h.v.Done() }

// Err returns nil while the holding is held, an error matching ErrNotHeld
// once it was released (by Release or RWLocks.Close), and one matching
// ErrLost and its cause (ErrExpired, with the failed renewal's error if any)
// once it was lost.
func (h *RWHolding) Err() error { return h.err() }

// ValidUntil returns the local monotonic time up to which the key is held.
func (h *RWHolding) ValidUntil() time.Time { return h.v.ValidUntil() }

// Remaining returns how much validity is left, or zero once the holding
// ended.
func (h *RWHolding) Remaining() time.Duration { return h.v.Remaining() }

// Extend sets the holding's expiry to ttl from now, shorter or longer,
// moves ValidUntil to match (a shorter ttl as the call is sent, since the
// store may apply it whatever becomes of the reply), and renewal then
// follows ttl; no other holding of the key changes. It returns ErrLost if the store no longer has the
// holding; ErrUnavailable if the store did not answer or ctx ended (validity
// kept, cut to ttl if shorter); ErrInvalid for a bad ttl or nil ctx and
// Err's error on an ended holding, both without I/O.
func (h *RWHolding) Extend(ctx context.Context, ttl time.Duration) error {
	return h.extend(ctx, ttl)
}

// Downgrade turns a write holding into a read holding in place, keeping its
// fence: other readers may then join, and writers stay out until it ends,
// a writer that was waiting included. It sets the expiry to the later of
// the current one and the holding's TTL from now. On a read holding it
// only confirms it. Errors are as for Extend; if the store did not answer,
// the holding may or may not have been downgraded: Mode says read from then
// on (a reader's view is safe either way) and another Downgrade retries.
func (h *RWHolding) Downgrade(ctx context.Context) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	ttl, _ := h.v.Current()
	return h.setExpiry(ctx, ttl, h.downgrade)
}

// downgrade asks the store for token's read holding of key. A refusal, or
// a grant with another fence (a new holding: the store had ended this one),
// means the holding is gone: the new holding, if any, is given back.
func (h *RWHolding) downgrade(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	h.mode.Store(int32(driver.RWRead))
	g, err := h.l.store.AcquireRead(ctx, key, token, ttl)
	var taken *driver.RWTakenError
	switch {
	case errors.As(err, &taken):
		return driver.Grant{TTL: g.TTL}, driver.NotHeld(taken.Held != 0)
	case err == nil && g.Fence != h.fence:
		h.l.giveBack(key, token, ttl, time.Time{}, nil)
		return driver.Grant{}, driver.NotHeld(false)
	}
	return driver.Grant{Fence: g.Fence, Holds: 1, TTL: g.TTL}, err
}

// Release ends the holding and stops renewal first. It returns nil once the
// store confirmed; ErrLost if the holding had been lost, ErrNotHeld if
// already released (or h is nil), ErrInvalid for a nil ctx (the holding
// still held). If the store did not answer or ctx had ended, it returns
// that error (matching ErrUnavailable and ctx's error): the holding is
// released locally and given back in the background, for at most its
// lease.
func (h *RWHolding) Release(ctx context.Context) error {
	if h == nil {
		return fmt.Errorf("%w: nil read-write holding", ErrNotHeld)
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	return h.release(ctx)
}
