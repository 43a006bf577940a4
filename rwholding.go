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

// RWHolding is a read or write holding of a read-write lock key: a lease of
// its own, with a fence and a validity that follows each renewal and Extend
// until it is released or lost. It is safe for concurrent use.
//
// As for a Lease, the validity is measured on the local monotonic clock,
// reduced by the time the call that set the holding's expiry took and by
// clock drift; Done is closed a margin before ValidUntil if the holding was
// not extended in time, and Err says why it ended.
type RWHolding struct {
	l          *RWLocks
	key, token string
	fence      uint64
	mode       atomic.Int32  // a driver.RWMode
	ttl        time.Duration // as acquired: bounds give-backs
	v          lease.Validity[Timer]
	renewal    lease.Slot // guarded by the renewer's mutex
}

// newHolding makes the RWHolding of a grant, tracks it for Close and queues
// it for renewal if cfg says so. If Close has begun (and so may have missed
// it), it releases the grant instead, bounded by the lease, and returns
// ErrNotAcquired and ErrInvalid.
func (l *RWLocks) newHolding(ctx context.Context, key, token string, mode driver.RWMode, g driver.RWGrant, cfg config, validUntil time.Time) (*RWHolding, error) {
	h := &RWHolding{l: l, key: key, token: token, fence: g.Fence, ttl: cfg.ttl, renewal: lease.NewSlot()}
	h.mode.Store(int32(mode))
	l.mu.Lock()
	closed := l.closed.Load() // Close sets it before it lists l.held
	if !closed {
		l.held[h] = struct{}{}
	}
	l.mu.Unlock()
	if closed {
		rctx, cancel := releaseContext(ctx, cfg.ttl)
		defer cancel()
		_ = l.store.ReleaseRW(rctx, key, token) // best effort: it expires anyway
		return nil, notAcquired(errRWClosed)
	}
	h.v.Init(cfg.clock, validUntil, cfg.ttl, h.holder())
	if cfg.renew {
		l.renewer.Add(h.renewable(), cfg.ttl)
	}
	return h, nil
}

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
func (h *RWHolding) Err() error { return h.v.Err(h.holder()) }

// ValidUntil returns the local monotonic time up to which the key is held.
func (h *RWHolding) ValidUntil() time.Time { return h.v.ValidUntil() }

// Remaining returns how much validity is left, or zero once the holding
// ended.
func (h *RWHolding) Remaining() time.Duration { return h.v.Remaining() }

// Extend sets the holding's expiry to ttl from now, shorter or longer,
// moves ValidUntil to match, and renewal then follows ttl; no other holding
// of the key changes. It returns ErrLost if the store no longer has the
// holding; ErrUnavailable if the store did not answer or ctx ended (validity
// kept, cut to ttl if shorter); ErrInvalid for a bad ttl or nil ctx and
// Err's error on an ended holding, both without I/O.
func (h *RWHolding) Extend(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	cfg := config{ttl: ttl, wait: -1, backoff: h.l.cfg.backoff, clock: h.l.cfg.clock}
	if err := rwValidate(h.l.model, &cfg); err != nil {
		return err
	}
	return h.setExpiry(ctx, cfg.ttl, h.l.store.ExtendRW)
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
func (h *RWHolding) downgrade(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	h.mode.Store(int32(driver.RWRead))
	g, err := h.l.store.AcquireRead(ctx, key, token, ttl)
	var taken *driver.RWTakenError
	switch {
	case errors.As(err, &taken):
		return g, driver.NotHeld(taken.Held != 0)
	case err == nil && g.Fence != h.fence:
		h.l.giveBack(key, token, ttl, time.Time{}, nil)
		return driver.RWGrant{}, driver.NotHeld(false)
	}
	return g, err
}

// setExpiry makes one call that sets the holding's expiry to at least ttl
// from now, serialised with renewal, and settles the validity with its
// outcome.
func (h *RWHolding) setExpiry(ctx context.Context, ttl time.Duration, call func(context.Context, string, string, time.Duration) (driver.RWGrant, error)) error {
	if err := h.Err(); err != nil {
		return err
	}
	if err := h.v.BeginCall(ctx); err != nil {
		return fmt.Errorf("%w: read-write lock %q: %w", ErrUnavailable, h.key, err)
	}
	start := h.v.Now()
	g, err := call(ctx, h.key, h.token, ttl)
	if err = h.v.Settle(h.holder(), start, ttl, g.TTL, classify(err)); err == nil {
		h.l.renewer.Retune(h.renewable(), ttl)
	}
	return err
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
	if err, first, back := h.v.Release(h.holder()); err != nil {
		if first {
			_ = h.l.store.ReleaseRW(ctx, h.key, h.token) // best effort: it expires anyway
		} else if back != nil {
			select { // the give-back that the loss started
			case <-back:
			case <-ctx.Done():
			}
		}
		return err
	}
	h.l.renewer.Remove(h.renewable())
	err := classify(h.l.store.ReleaseRW(ctx, h.key, h.token))
	switch {
	case err == nil:
		return nil
	case isNotHeld(err):
		return rwLostError(h.key, err)
	}
	h.l.giveBack(h.key, h.token, h.ttl, time.Time{}, nil)
	return fmt.Errorf("%w (the release is retried in the background)", err)
}

// rwLostError is the error a holding reports once lost.
func rwLostError(key string, cause error) error {
	return tidy(fmt.Errorf("%w: read-write lock %q: %w", ErrLost, key, cause))
}

// rwHolder is an RWHolding as the lease engine sees its end (lease.Holder).
type rwHolder RWHolding

func (h *RWHolding) holder() *rwHolder { return (*rwHolder)(h) }

// LostError implements lease.Holder.
func (r *rwHolder) LostError(cause error) error { return rwLostError(r.key, cause) }

// Ended implements lease.Holder: Close has nothing left to release.
func (r *rwHolder) Ended() {
	r.l.mu.Lock()
	delete(r.l.held, (*RWHolding)(r))
	r.l.mu.Unlock()
}

// Lost implements lease.Holder: renewal stops, and a holding the store may
// still have is given back in the background once its validity is over,
// token-checked. Nothing is given back when the store said the token holds
// nothing, nor after Close.
func (r *rwHolder) Lost() {
	h := (*RWHolding)(r)
	h.l.renewer.Remove(h.renewable())
	cause := h.v.Err(r)
	if isNotHeld(cause) || h.l.closed.Load() {
		return
	}
	if back := h.v.ClaimGiveBack(); back != nil {
		h.l.giveBack(h.key, h.token, h.ttl, h.ValidUntil(), func() { close(back) })
	}
}

// Expire implements lease.Holder.
func (r *rwHolder) Expire() { r.v.Expire(r) }

// rwRenewable is an RWHolding as the renewal loop sees it
// (lease.Renewable).
type rwRenewable RWHolding

func (h *RWHolding) renewable() *rwRenewable { return (*rwRenewable)(h) }

// Slot implements lease.Renewable.
func (r *rwRenewable) Slot() *lease.Slot { return &r.renewal }

// BeginRenewal implements lease.Renewable: a renewal asks for the TTL the
// holding's expiry was set to last.
func (r *rwRenewable) BeginRenewal() (driver.ExtendRequest, time.Time, bool) {
	ttl, until, ok := r.v.TryBeginCall()
	return driver.ExtendRequest{Key: r.key, Token: r.token, TTL: ttl}, until, ok
}

// SettleRenewal implements lease.Renewable.
func (r *rwRenewable) SettleRenewal(start time.Time, req driver.ExtendRequest, res driver.ExtendResult) bool {
	h := (*RWHolding)(r)
	return h.v.Settle(h.holder(), start, req.TTL, res.Grant.TTL, classify(res.Err)) != nil
}

// Current implements lease.Renewable.
func (r *rwRenewable) Current() (time.Duration, bool) { return r.v.Current() }
