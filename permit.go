package dlock

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock/driver"
)

// Permit is a holding of permits of a semaphore key: a lease of its own,
// with a fence and a validity that follows each renewal and Extend until it
// is released or lost. It is safe for concurrent use.
//
// As for a Lease, the validity is measured on the local monotonic clock,
// reduced by the time the call that set the holding's expiry took and by
// clock drift; Done is closed a margin before ValidUntil if the permit was
// not extended in time, and Err says why it ended.
type Permit struct {
	member
	permits int
}

// newPermit makes the Permit of a grant, tracks it for Close and queues it
// for renewal if cfg says so. If Close has begun (and so may have missed
// it), it releases the grant instead, bounded by the lease, and returns
// ErrNotAcquired and ErrInvalid.
func (s *Semaphores) newPermit(ctx context.Context, key, token string, g driver.PermitGrant, cfg config, validUntil time.Time) (*Permit, error) {
	p := &Permit{permits: g.Permits}
	if err := s.adopt(ctx, &p.member, p, key, token, g.Fence, cfg, validUntil); err != nil {
		return nil, err
	}
	return p, nil
}

// eventKind implements famHolding.
func (p *Permit) eventKind() Kind { return KindPermit }

// grant implements famHolding and granted.
func (p *Permit) grant() (uint64, int) { return p.fence, p.permits }

// Key returns the semaphore's key.
func (p *Permit) Key() string { return p.key }

// Fence returns the holding's fencing token: strictly greater than that of
// every earlier holding of the key. Pass it to the protected resource.
func (p *Permit) Fence() uint64 { return p.fence }

// Permits returns how many permits the holding has.
func (p *Permit) Permits() int { return p.permits }

// Done returns a channel closed when the permit ends: released, or lost.
func (p *Permit) Done() <-chan struct{} { return p.v.Done() }

// Err returns nil while the permit is held, an error matching ErrNotHeld
// once it was released (by Release or Semaphores.Close), and one matching
// ErrLost and its cause (ErrExpired, with the failed renewal's error if
// any) once it was lost.
func (p *Permit) Err() error { return p.err() }

// ValidUntil returns the local monotonic time up to which the permits are
// held.
func (p *Permit) ValidUntil() time.Time { return p.v.ValidUntil() }

// Remaining returns how much validity is left, or zero once the permit
// ended.
func (p *Permit) Remaining() time.Duration { return p.v.Remaining() }

// Extend sets the holding's expiry to ttl from now, shorter or longer,
// moves ValidUntil to match (a shorter ttl as the call is sent, since the
// store may apply it whatever becomes of the reply), and renewal then
// follows ttl. It returns
// ErrLost if the store no longer has the holding; ErrUnavailable if the
// store did not answer or ctx ended (validity kept, cut to ttl if shorter);
// ErrInvalid for a bad ttl or nil ctx and Err's error on an ended permit,
// both without I/O.
func (p *Permit) Extend(ctx context.Context, ttl time.Duration) error {
	return p.extend(ctx, ttl)
}

// Release gives the permits back and stops renewal first. It returns nil
// once the store confirmed; ErrLost if the permit had been lost, ErrNotHeld
// if already released (or p is nil), ErrInvalid for a nil ctx (the permit
// still held). If the store did not answer or ctx had ended, it returns
// that error (matching ErrUnavailable and ctx's error): the permit is
// released locally and given back in the background, for at most its lease.
func (p *Permit) Release(ctx context.Context) error {
	if p == nil {
		return fmt.Errorf("%w: nil permit", ErrNotHeld)
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	return p.release(ctx)
}
