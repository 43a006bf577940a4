package dlock

import (
	"context"
	"errors"
)

// handoff tries to pass l, being released, to the next local waiter for its
// key (see queue.go). It reports whether it dealt with the release; if so,
// err is Release's result. If it did not, the caller releases to the store.
func (c *Client) handoff(ctx context.Context, l *Lease) (handled bool, err error) {
	tr, ok := c.store.(Transferer)
	if !ok {
		return false, nil
	}
	w := c.queues.handoffTarget(l.key, l.slot)
	if w == nil {
		return false, nil
	}
	token := newToken()
	start := w.cfg.clock.Now()
	var g Grant
	var v *Value
	if w.cfg.read != nil && c.reader != nil {
		v = new(Value)
		g, *v, err = c.reader.TransferRead(ctx, l.key, l.token, token, w.cfg.ttl, *w.cfg.read)
	} else {
		g, err = tr.Transfer(ctx, l.key, l.token, token, w.cfg.ttl)
	}
	if err == nil {
		validUntil := start.Add(g.TTL - drift(w.cfg.ttl))
		if w.cfg.clock.Now().Before(validUntil) {
			c.queues.deliver(w, c.newLease(l.key, token, g, w.cfg, validUntil, l.slot, v))
			return true, nil
		}
		// The grant was over on arrival: free the key, and let the waiter
		// acquire for itself.
		err = c.store.Release(ctx, l.key, token)
		c.queues.deliver(w, nil)
		return true, classify(err)
	}
	err = classify(err)
	if errors.Is(err, ErrInvalid) {
		// Re-entered under the same owner, or the waiter's WithRead resource
		// was refused (nothing changed then either): release our hold only;
		// the waiter acquires for itself and meets its own error.
		err = classify(c.store.Release(ctx, l.key, l.token))
	}
	c.queues.deliver(w, nil)
	if isNotHeld(err) {
		return true, lostError(l.key, err)
	}
	return true, err
}
