package dlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"example.com/dlock/driver"
)

// waiter holds the state of one blocking acquisition between attempts: how
// many attempts failed, what they said and, for stores that notify, the
// subscription.
type waiter struct {
	c        *Client
	key      string
	token    string
	owned    bool      // token is an explicit Owner's
	q        *keyQueue // the key's local slot, nil if the call bypasses the queue
	cfg      config
	failures int
	// last is the last attempt's error that was an answer, not the context
	// ending mid-call: the cause reported when the wait ends.
	last error
	// unsure counts the attempts since the last "contended" answer whose
	// outcome is unknown (no reply): each may have left a hold of token.
	unsure int
	wake   <-chan struct{}
	cancel func()
}

// loop makes attempts until one succeeds, the error is final, or the wait
// ends; it then returns the last attempt's error (see w.last for the last
// answer).
func (w *waiter) loop(ctx context.Context, yield bool) (*Lease, error) {
	c := w.c
	if yield && !w.sleep(ctx, yieldDelay()) {
		return nil, errQueued
	}
	for first := true; ; first = false {
		if c.life.closed.Load() {
			return nil, errClosed
		}
		l, err := c.attempt(ctx, w.key, w.token, w.owned, w.cfg, w.q)
		if err == nil {
			if yield && first {
				c.queues.contended(w.q, false) // nobody took the key while we yielded
			}
			return l, nil
		}
		var ce *ContendedError
		contended := errors.As(err, &ce)
		switch {
		case contended:
			w.unsure = 0 // another token holds the key: ours holds nothing
			if w.q != nil {
				c.queues.contended(w.q, true)
			}
		case errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			w.unsure++
		}
		if ctx.Err() != nil {
			// Cut short by the end of the wait: not an answer. If the wait
			// ran out (a deadline, not a cancellation) with no answer before
			// it, the store did not answer in time: say so (the error then
			// matches ErrUnavailable, as Lock documents).
			// A queued attempt waits until the end by design: its end is
			// no sign of an unreachable store.
			if w.last == nil && !w.queued() && errors.Is(err, ErrUnavailable) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				w.last = err
			}
			return nil, err
		}
		w.last = err
		if c.life.closed.Load() {
			return nil, errClosed // a queued acquisition Close cut short
		}
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrRefused) || w.cfg.wait == 0 {
			return nil, err
		}
		if w.cfg.onRetry != nil {
			w.notify(err)
		}
		if !w.pause(ctx, contended, ce) {
			return nil, err
		}
	}
}

// queued reports whether the wait's attempts wait in the store's own queue.
func (w *waiter) queued() bool { return w.c.queuerFor(w.cfg) != nil }

// queuerFor returns the store's queue (driver.Queuer) if attempts made with
// cfg wait in it: a Lock's (not a single try's) without a read with the
// grant (which the queue cannot do), on a store that has one; else nil.
func (c *Client) queuerFor(cfg config) driver.Queuer {
	if cfg.wait == 0 || (cfg.read != nil && c.caps.atomic != nil) {
		return nil
	}
	return c.caps.queuer
}

// failed ends a wait that loop ended with err: it gives up the local slot,
// releases in the background what attempts without an answer may have left
// (see Client.Lock), and says why the wait ended.
func (w *waiter) failed(ctx, wctx context.Context, err error) error {
	c := w.c
	if w.q != nil {
		c.queues.leave(w.key, w.q, false)
	}
	if w.unsure > 0 && !w.owned {
		c.dropHolds(ctx, w.key, w.cfg.ttl, w.unsure, w.token)
	}
	switch {
	case err == errClosed, errors.Is(err, ErrRefused):
		return notAcquired(err)
	case errors.Is(err, ErrInvalid):
		return err
	case w.cfg.wait == 0 && wctx.Err() == nil:
		return notAcquired(err)
	}
	return waitError(ctx, wctx, w.key, w.last)
}

// pause sleeps before the next attempt. It reports false if ctx ended first.
//
// On the first contention with a store that notifies, it subscribes and
// returns at once: the retry that follows closes the gap between the failed
// attempt and the subscription, so no release is missed. Afterwards it sleeps
// until a release is announced or the holder's lease would expire, whichever
// comes first; the expiry wake-up covers a missed message.
func (w *waiter) pause(ctx context.Context, contended bool, ce *ContendedError) bool {
	w.failures++
	if contended && w.cancel == nil {
		if n := w.c.caps.notifier; n != nil {
			if ch, cancel, serr := n.Subscribe(ctx, w.key); serr == nil {
				w.wake, w.cancel = ch, cancel
				return ctx.Err() == nil
			}
		}
	}
	return w.sleep(ctx, w.delay(contended, ce))
}

// sleep waits for d, a release announcement or the client's Close (the next
// attempt then fails at once). It reports false if ctx ended first.
func (w *waiter) sleep(ctx context.Context, d time.Duration) bool {
	elapsed := make(chan struct{})
	t := w.cfg.clock.AfterFunc(d, func() { close(elapsed) })
	defer t.Stop()
	select {
	case <-elapsed:
	case <-w.wake:
	case <-w.c.life.closing:
	case <-ctx.Done():
		return false
	}
	return true
}

// notify tells the WithOnRetry callback of the failed attempt about to be
// paused after (counted as pause will count it).
func (w *waiter) notify(err error) {
	w.cfg.onRetry(w.failures+1, err)
}

func (w *waiter) delay(contended bool, ce *ContendedError) time.Duration {
	d := w.cfg.backoff(w.failures)
	if !contended || ce.Remaining < 0 {
		return d
	}
	// The holder's expiry, plus a little jitter so that the waiters of one
	// holder do not all retry at the same instant.
	expiry := ce.Remaining + rand.N(time.Millisecond+ce.Remaining/50)
	if w.wake != nil || expiry < d {
		return expiry
	}
	return d
}

func (w *waiter) unsubscribe() {
	if w.cancel != nil {
		w.cancel()
	}
}
