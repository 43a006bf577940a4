package dlock

import (
	"context"
	"errors"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/lease"
)

// waiter holds the state of one blocking acquisition between attempts: what
// they said, and their pacing (failures, the subscription of stores that
// notify, sleeps: lease.Pacer).
type waiter struct {
	c     *Client
	key   string
	token string
	owned bool      // token is an explicit Owner's
	q     *keyQueue // the key's local slot, nil if the call bypasses the queue
	turn  *turnSub  // the wait's place in the key's line (turns.go), or nil
	rec   *record   // the owner's record of the key, if owned (record.go)
	cfg   config
	pace  lease.Pacer[Timer] // failures, subscription and sleeps (the lease engine)
	// last is the last attempt's error that was an answer, not the context
	// ending mid-call: the cause reported when the wait ends.
	last error
	// unsure counts the attempts since the last "contended" answer whose
	// outcome is unknown (no reply): each may have left a hold of token.
	unsure int
}

// loop makes attempts until one succeeds, the error is final, or the wait
// ends; it then returns the last attempt's error (see w.last for the last
// answer).
func (w *waiter) loop(ctx context.Context, yield bool) (*Lease, error) {
	c := w.c
	if yield && !w.pace.Sleep(ctx, yieldDelay()) {
		return nil, errQueued
	}
	for first := true; ; first = false {
		if c.life.closed.Load() {
			return nil, errClosed
		}
		l, err := c.attempt(ctx, w.key, w.token, w.rec, w.cfg, w.q)
		if err == nil {
			w.turn.acquired() // see turnSub.leave
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
			w.turn.unanswered()
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
// cfg wait in it: a Lock's (not a single try's), on a store that has one,
// and for a read with the grant only if the queue can read it
// (driver.QueueReader); else nil.
func (c *Client) queuerFor(cfg config) driver.Queuer {
	if cfg.wait == 0 || (cfg.read != nil && c.caps.atomic != nil && c.caps.qread == nil) {
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
		c.giveBack(w.key, w.token, w.unsure, w.cfg.ttl, time.Time{}, nil)
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

// pause sleeps before the next attempt (see lease.Pacer.Pause). It reports
// false if ctx ended first.
func (w *waiter) pause(ctx context.Context, contended bool, ce *ContendedError) bool {
	remaining, retry := time.Duration(-1), time.Duration(0)
	if contended {
		remaining, retry = ce.Remaining, ce.Retry
	}
	return w.pace.Pause(ctx, w.key, contended, remaining, retry)
}

// notify tells the WithOnRetry callback of the failed attempt about to be
// paused after (counted as pause will count it).
func (w *waiter) notify(err error) {
	w.cfg.onRetry(w.pace.Failures()+1, err)
}

func (w *waiter) unsubscribe() { w.pace.Stop() }
