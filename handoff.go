package dlock

import (
	"context"
	"errors"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/lease"
)

// handoff tries to pass l, being released (with w applied, if not nil), to
// the next local waiter for its key (see queue.go). It reports whether it
// dealt with the release; if so, err is Release's result. If it did not, the
// caller releases to the store. A closed Client hands nothing off.
func (c *Client) handoff(ctx context.Context, l *Lease, w *write) (handled bool, err error) {
	tr := c.caps.transfer
	if tr == nil || c.life.closed.Load() {
		return false, nil
	}
	q := c.queues.handoffTarget(l.key, l.slot, l.v.Now())
	if q == nil {
		return false, nil
	}
	token := newToken()
	start := q.cfg.clock.Now()
	g, v, err := c.transfer(ctx, tr, l, token, q.cfg, w)
	took := q.cfg.clock.Now().Sub(start)
	if err == nil {
		validUntil := lease.ValidUntil(start, g.TTL, q.cfg.ttl)
		if q.cfg.clock.Now().Before(validUntil) {
			c.queues.deliver(l.slot, q, c.newLease(l.key, token, nil, g, q.cfg, validUntil, l.slot, v), took)
			l.observe(ctx, Event{Type: EventHandedOff})
			return true, nil
		}
		// The grant was over on arrival: free the key (the write, if any,
		// was made: l's release is done), and let the waiter acquire for
		// itself. Nobody has token, so the release must not depend on ctx.
		c.giveBack(l.key, token, 1, q.cfg.ttl, time.Time{}, nil)
		c.queues.deliver(l.slot, q, nil, took)
		l.observe(ctx, endEvent(nil, true))
		return true, nil
	}
	err = classify(err)
	back := true
	switch {
	case isNotHeld(err):
		back = false
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrRefused):
		// Nothing changed (re-entered under the same owner, the waiter's
		// WithRead resource refused, or the store refuses transfers):
		// release our hold only; the waiter acquires for itself and meets
		// its own error.
		err = c.storeRelease(ctx, l.key, l.token, w)
		back = err != nil && !isNotHeld(err)
		if back {
			c.giveBack(l.key, l.token, 1, l.ttl, time.Time{}, nil)
		}
	default:
		// No answer: the transfer may have been applied, leaving the key
		// under token, which nobody has (the waiter is told to acquire for
		// itself), or not, leaving it under l's.
		c.dropHandoff(l, token, q.cfg.ttl)
	}
	c.queues.deliver(l.slot, q, nil, took)
	l.observe(ctx, endEvent(err, back))
	if isNotHeld(err) {
		return true, lostError(l.key, err)
	}
	return true, err
}

// dropHandoff frees, in the background, the key of a handoff whose outcome
// is unknown. l's token goes first: once it is released, a transfer still
// in flight finds it gone and changes nothing. Then the recipient's token,
// which nobody has, is released too in case the transfer was applied (if
// it was not, the store says it holds nothing). Both are retried until the
// store answers (giveback.go).
func (c *Client) dropHandoff(l *Lease, token string, ttl time.Duration) {
	c.backgroundFor(c.giveBackBound(max(ttl, l.ttl)), func(ctx context.Context) {
		c.releaseN(ctx, l.key, l.token, 1)
		c.releaseN(ctx, l.key, token, 1)
	})
}

// transfer hands l's lock to token for a waiter configured as cfg, reading
// the waiter's WithRead resource and applying w in the same call.
func (c *Client) transfer(ctx context.Context, tr driver.Transferer, l *Lease, token string, cfg config, w *write) (g driver.Grant, v *grantRead, err error) {
	step := driver.Step{Action: driver.Transfer, Key: l.key, Token: l.token, To: token, TTL: cfg.ttl}
	if cfg.read != nil && c.caps.atomic != nil {
		step.Read = *cfg.read
		v = &grantRead{resource: step.Read}
	}
	if w != nil {
		step.Write = &driver.Write{Resource: w.resource, Value: w.value}
		if step.Read == w.resource {
			// The waiter reads what we write: no need to read it back.
			step.Read = ""
			v.Value = driver.Value{Data: w.value, Found: true}
		}
	}
	if step.Read == "" && step.Write == nil {
		g, err = tr.Transfer(ctx, l.key, l.token, token, cfg.ttl)
		return g, nil, err
	}
	var got driver.Value
	g, got, err = c.caps.atomic.Apply(ctx, step)
	if v != nil && step.Read != "" {
		v.Value = got
	}
	return g, v, err
}

// storeRelease removes token's hold on key in the store, applying w with it
// if not nil. A write the store refuses as invalid (nothing changed) still
// frees the lock, with a plain release, so that the key does not stay held
// until its TTL; the error reports the refusal.
func (c *Client) storeRelease(ctx context.Context, key, token string, w *write) error {
	if w == nil {
		return classify(c.store.Release(ctx, key, token))
	}
	step := driver.Step{Action: driver.Release, Key: key, Token: token, Write: &driver.Write{Resource: w.resource, Value: w.value}}
	_, _, err := c.caps.atomic.Apply(ctx, step)
	err = classify(err)
	if errors.Is(err, ErrInvalid) {
		return joinLine(err, classify(c.store.Release(ctx, key, token)))
	}
	return err
}
