package dlock

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/lease"
)

// member is what a holding of a Semaphores or RWLocks (Permit, RWHolding)
// is to the machinery they share (famCore): a lease of its own, with a
// fence and a validity that follows each renewal and Extend until it is
// released or lost, tracked for Close and renewed by the core's renewer.
type member struct {
	c          *famCore
	self       famHolding // the holding this is part of: its events' kind
	key, token string
	fence      uint64
	ttl        time.Duration // as acquired: bounds give-backs
	v          lease.Validity[Timer]
	renewal    lease.Slot // guarded by the renewer's mutex
	watch      *watch     // the Observer of the call that made it, if any (observe.go)
}

// famHolding is a Permit or RWHolding as its events describe it.
type famHolding interface {
	eventKind() Kind
	grant() (fence uint64, count int)
}

// adopt makes m the member of self for a grant of fence made by a call
// configured as cfg, tracks it for Close and queues it for renewal if cfg
// says so. If Close has begun (and so may have missed it), it releases the
// grant instead, bounded by the lease, and returns ErrNotAcquired and
// ErrInvalid.
func (f *famCore) adopt(ctx context.Context, m *member, self famHolding, key, token string, fence uint64, cfg config, validUntil time.Time) error {
	m.c, m.self, m.key, m.token, m.fence, m.ttl = f, self, key, token, fence, cfg.ttl
	m.renewal, m.watch = lease.NewSlot(), newWatch(cfg)
	f.mu.Lock()
	closed := f.closed.Load() // close sets it before it lists f.held
	if !closed {
		f.held[m] = struct{}{}
	}
	f.mu.Unlock()
	if closed {
		rctx, cancel := releaseContext(ctx, cfg.ttl)
		defer cancel()
		_ = f.fs.release(rctx, key, token) // best effort: it expires anyway
		return notAcquired(f.errClosed)
	}
	m.v.Init(cfg.clock, validUntil, cfg.ttl, m.holder())
	if cfg.renew {
		f.renewer.Add(m.renewable(), cfg.ttl)
	}
	return nil
}

// err is the holding's Err: nil while held.
func (m *member) err() error { return m.v.Err(m.holder()) }

// extend is the holding's Extend to ttl.
func (m *member) extend(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	ttl, err := m.c.extendTTL(ttl)
	if err != nil {
		return err
	}
	return m.setExpiry(ctx, ttl, m.c.fs.extend)
}

// expiryCall is a store call that sets token's expiry of key to at least
// ttl from now and returns the grant (its TTL: the one set).
type expiryCall func(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error)

// setExpiry makes one call that sets the holding's expiry to at least ttl
// from now, serialised with renewal, and settles the validity with its
// outcome.
func (m *member) setExpiry(ctx context.Context, ttl time.Duration, call expiryCall) error {
	if err := m.err(); err != nil {
		return err
	}
	if err := m.v.BeginCall(ctx); err != nil {
		return fmt.Errorf("%w: %s %q: %w", ErrUnavailable, m.c.noun, m.key, err)
	}
	start := m.v.Now()
	// A shorter ttl may be applied as soon as it is sent: the validity
	// follows it now, not when (or if) the reply comes.
	m.v.Shorten(m.holder(), lease.ValidUntil(start, ttl, ttl))
	g, err := call(ctx, m.key, m.token, ttl)
	if err = m.v.Settle(m.holder(), start, ttl, g.TTL, classify(err)); err == nil {
		m.c.renewer.Retune(m.renewable(), ttl)
	}
	return err
}

// release is the holding's Release once its arguments were checked.
func (m *member) release(ctx context.Context) error {
	if err, first, back := m.v.Release(m.holder()); err != nil {
		releaseEnded(ctx, first, back, m.releaseLost)
		return err
	}
	m.c.renewer.Remove(m.renewable())
	err := classify(m.c.fs.release(ctx, m.key, m.token))
	back := err != nil && !isNotHeld(err)
	m.observe(ctx, endEvent(err, back))
	switch {
	case err == nil:
		return nil
	case isNotHeld(err):
		return m.lostError(err)
	}
	m.c.giveBack(m.key, m.token, m.ttl, time.Time{}, nil)
	return fmt.Errorf("%w (the release is retried in the background)", err)
}

// releaseLost is the best-effort release of a holding that was lost: it
// expires anyway.
func (m *member) releaseLost(ctx context.Context) { _ = m.c.fs.release(ctx, m.key, m.token) }

// releaseEnded is what Release does for a holding that had ended (lost)
// before it: the first Release after the loss makes one release
// (releaseLost); the others wait, within ctx, for the give-back that the
// loss started if any (back).
func releaseEnded(ctx context.Context, first bool, back <-chan struct{}, releaseLost func(context.Context)) {
	if first {
		releaseLost(ctx)
	} else if back != nil {
		select {
		case <-back:
		case <-ctx.Done():
		}
	}
}

// lostError is the error the holding reports once lost.
func (m *member) lostError(cause error) error {
	return tidy(fmt.Errorf("%w: %s %q: %w", ErrLost, m.c.noun, m.key, cause))
}

// memberHolder is a member as the lease engine sees its end (lease.Holder).
type memberHolder member

func (m *member) holder() *memberHolder { return (*memberHolder)(m) }

// LostError implements lease.Holder.
func (h *memberHolder) LostError(cause error) error { return (*member)(h).lostError(cause) }

// Ended implements lease.Holder: Close has nothing left to release.
func (h *memberHolder) Ended() {
	h.c.mu.Lock()
	delete(h.c.held, (*member)(h))
	h.c.mu.Unlock()
}

// Lost implements lease.Holder: renewal stops, and a holding the store may
// still have (a renewal whose reply came too late, or none) is given back
// in the background once its validity is over, token-checked. Nothing is
// given back when the store said the token holds nothing, nor after Close.
func (h *memberHolder) Lost() {
	m := (*member)(h)
	m.c.renewer.Remove(m.renewable())
	cause := m.v.Err(h)
	if m.watch != nil {
		m.observe(context.Background(), Event{Type: EventLost, Outcome: lossOutcome(cause), Err: cause})
	}
	if isNotHeld(cause) || m.c.closed.Load() {
		return
	}
	if back := m.v.ClaimGiveBack(); back != nil {
		m.c.giveBack(m.key, m.token, m.ttl, m.v.ValidUntil(), func() { close(back) })
	}
}

// Expire implements lease.Holder.
func (h *memberHolder) Expire() { h.v.Expire(h) }

// memberRenewable is a member as the renewal loop sees it
// (lease.Renewable).
type memberRenewable member

func (m *member) renewable() *memberRenewable { return (*memberRenewable)(m) }

// Slot implements lease.Renewable.
func (r *memberRenewable) Slot() *lease.Slot { return &r.renewal }

// BeginRenewal implements lease.Renewable: a renewal asks for the TTL the
// holding's expiry was set to last.
func (r *memberRenewable) BeginRenewal() (driver.ExtendRequest, time.Time, bool) {
	ttl, until, ok := r.v.TryBeginCall()
	return driver.ExtendRequest{Key: r.key, Token: r.token, TTL: ttl}, until, ok
}

// SettleRenewal implements lease.Renewable.
func (r *memberRenewable) SettleRenewal(start time.Time, req driver.ExtendRequest, res driver.ExtendResult) bool {
	m := (*member)(r)
	err := classify(res.Err)
	if m.watch != nil {
		m.observe(context.Background(), renewEvent(start, m.v.Now(), err))
	}
	return m.v.Settle(m.holder(), start, req.TTL, res.Grant.TTL, err) != nil
}

// Current implements lease.Renewable.
func (r *memberRenewable) Current() (time.Duration, bool) { return r.v.Current() }
