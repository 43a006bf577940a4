package dlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// waiter holds the state of one blocking acquisition between attempts: how
// many attempts failed and, for stores that notify, the subscription.
type waiter struct {
	c        *Client
	key      string
	cfg      config
	failures int
	wake     <-chan struct{}
	cancel   func()
}

// pause sleeps before the next attempt after err. It reports false if ctx
// ended first.
//
// On the first contention with a store that notifies, it subscribes and
// returns at once: the retry that follows closes the gap between the failed
// attempt and the subscription, so no release is missed. Afterwards it sleeps
// until a release is announced or the holder's lease would expire, whichever
// comes first; the expiry wake-up covers a missed message.
func (w *waiter) pause(ctx context.Context, err error) bool {
	w.failures++
	var ce *ContendedError
	contended := errors.As(err, &ce)
	if contended && w.cancel == nil {
		if n, ok := w.c.store.(Notifier); ok {
			if ch, cancel, serr := n.Subscribe(ctx, w.key); serr == nil {
				w.wake, w.cancel = ch, cancel
				return ctx.Err() == nil
			}
		}
	}
	return sleep(ctx, w.cfg.clock, w.delay(contended, ce), w.wake)
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
