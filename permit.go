package dlock

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/lease"
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
	s          *Semaphores
	key, token string
	fence      uint64
	permits    int
	ttl        time.Duration // as acquired: bounds give-backs
	v          lease.Validity[Timer]
	renewal    lease.Slot // guarded by the renewer's mutex
	watch      *watch     // the Observer of the call that made it, if any (observe.go)
}

// newPermit makes the Permit of a grant, tracks it for Close and queues it
// for renewal if cfg says so. If Close has begun (and so may have missed
// it), it releases the grant instead, bounded by the lease, and returns
// ErrNotAcquired and ErrInvalid.
func (s *Semaphores) newPermit(ctx context.Context, key, token string, g driver.PermitGrant, cfg config, validUntil time.Time) (*Permit, error) {
	p := &Permit{s: s, key: key, token: token, fence: g.Fence, permits: g.Permits, ttl: cfg.ttl, renewal: lease.NewSlot(), watch: newWatch(cfg)}
	s.mu.Lock()
	closed := s.closed.Load() // Close sets it before it lists s.held
	if !closed {
		s.held[p] = struct{}{}
	}
	s.mu.Unlock()
	if closed {
		rctx, cancel := releaseContext(ctx, cfg.ttl)
		defer cancel()
		_ = s.store.ReleasePermits(rctx, key, token) // best effort: it expires anyway
		return nil, notAcquired(errSemClosed)
	}
	p.v.Init(cfg.clock, validUntil, cfg.ttl, p.holder())
	if cfg.renew {
		s.renewer.Add(p.renewable(), cfg.ttl)
	}
	return p, nil
}

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
func (p *Permit) Err() error { return p.v.Err(p.holder()) }

// ValidUntil returns the local monotonic time up to which the permits are
// held.
func (p *Permit) ValidUntil() time.Time { return p.v.ValidUntil() }

// Remaining returns how much validity is left, or zero once the permit
// ended.
func (p *Permit) Remaining() time.Duration { return p.v.Remaining() }

// Extend sets the holding's expiry to ttl from now, shorter or longer,
// moves ValidUntil to match, and renewal then follows ttl. It returns
// ErrLost if the store no longer has the holding; ErrUnavailable if the
// store did not answer or ctx ended (validity kept, cut to ttl if shorter);
// ErrInvalid for a bad ttl or nil ctx and Err's error on an ended permit,
// both without I/O.
func (p *Permit) Extend(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	cfg := config{ttl: ttl, wait: -1, backoff: p.s.cfg.backoff, clock: p.s.cfg.clock}
	if err := semValidate(p.s.model, &cfg); err != nil {
		return err
	}
	ttl = cfg.ttl
	if err := p.Err(); err != nil {
		return err
	}
	if err := p.v.BeginCall(ctx); err != nil {
		return fmt.Errorf("%w: semaphore %q: %w", ErrUnavailable, p.key, err)
	}
	start := p.v.Now()
	g, err := p.s.store.ExtendPermits(ctx, p.key, p.token, ttl)
	if err = p.v.Settle(p.holder(), start, ttl, g.TTL, classify(err)); err == nil {
		p.s.renewer.Retune(p.renewable(), ttl)
	}
	return err
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
	if err, first, back := p.v.Release(p.holder()); err != nil {
		if first {
			_ = p.s.store.ReleasePermits(ctx, p.key, p.token) // best effort: it expires anyway
		} else if back != nil {
			select { // the give-back that the loss started
			case <-back:
			case <-ctx.Done():
			}
		}
		return err
	}
	p.s.renewer.Remove(p.renewable())
	err := classify(p.s.store.ReleasePermits(ctx, p.key, p.token))
	back := err != nil && !isNotHeld(err)
	p.observe(ctx, endEvent(err, back))
	switch {
	case err == nil:
		return nil
	case isNotHeld(err):
		return permitLostError(p.key, err)
	}
	p.s.giveBack(p.key, p.token, p.ttl, time.Time{})
	return fmt.Errorf("%w (the release is retried in the background)", err)
}

// permitLostError is the error a permit reports once lost.
func permitLostError(key string, cause error) error {
	return tidy(fmt.Errorf("%w: semaphore %q: %w", ErrLost, key, cause))
}

// permitHolder is a Permit as the lease engine sees its end (lease.Holder).
type permitHolder Permit

func (p *Permit) holder() *permitHolder { return (*permitHolder)(p) }

// LostError implements lease.Holder.
func (h *permitHolder) LostError(cause error) error { return permitLostError(h.key, cause) }

// Ended implements lease.Holder: Close has nothing left to release.
func (h *permitHolder) Ended() {
	h.s.mu.Lock()
	delete(h.s.held, (*Permit)(h))
	h.s.mu.Unlock()
}

// Lost implements lease.Holder: renewal stops, and a holding the store may
// still have (a renewal whose reply came too late, or none) is given back
// in the background once its validity is over, token-checked. Nothing is
// given back when the store said the token holds nothing, nor after Close.
func (h *permitHolder) Lost() {
	p := (*Permit)(h)
	p.s.renewer.Remove(p.renewable())
	cause := p.v.Err(h)
	if p.watch != nil {
		p.observe(context.Background(), Event{Type: EventLost, Outcome: lossOutcome(cause), Err: cause})
	}
	if isNotHeld(cause) || p.s.closed.Load() {
		return
	}
	if back := p.v.ClaimGiveBack(); back != nil {
		p.s.giveBackThen(p.key, p.token, p.ttl, p.ValidUntil(), func() { close(back) })
	}
}

// Expire implements lease.Holder.
func (h *permitHolder) Expire() { h.v.Expire(h) }

// permitRenewable is a Permit as the renewal loop sees it
// (lease.Renewable).
type permitRenewable Permit

func (p *Permit) renewable() *permitRenewable { return (*permitRenewable)(p) }

// Slot implements lease.Renewable.
func (r *permitRenewable) Slot() *lease.Slot { return &r.renewal }

// BeginRenewal implements lease.Renewable: a renewal asks for the TTL the
// holding's expiry was set to last.
func (r *permitRenewable) BeginRenewal() (driver.ExtendRequest, time.Time, bool) {
	ttl, until, ok := r.v.TryBeginCall()
	return driver.ExtendRequest{Key: r.key, Token: r.token, TTL: ttl}, until, ok
}

// SettleRenewal implements lease.Renewable.
func (r *permitRenewable) SettleRenewal(start time.Time, req driver.ExtendRequest, res driver.ExtendResult) bool {
	p := (*Permit)(r)
	err := classify(res.Err)
	if p.watch != nil {
		p.observe(context.Background(), renewEvent(start, p.v.Now(), err))
	}
	return p.v.Settle(p.holder(), start, req.TTL, res.Grant.TTL, err) != nil
}

// Current implements lease.Renewable.
func (r *permitRenewable) Current() (time.Duration, bool) { return r.v.Current() }
