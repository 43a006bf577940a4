package lease

import (
	"context"
	"math/rand/v2"
	"time"

	"example.com/dlock/driver"
)

// Pacer paces a wait between a primitive's attempts: it wakes on a release
// notification (driver.Notifier) when the store has one, at the holder's
// expiry when the store reports it, else after the backoff. A Pacer serves
// one wait; call Stop when the wait ends.
type Pacer[T Stopper] struct {
	clock    Clock[T]
	backoff  func(failures int) time.Duration
	notifier driver.Notifier // nil: the store cannot notify
	closing  <-chan struct{} // closed when the client closes: ends sleeps early
	failures int
	wake     <-chan struct{}
	cancel   func()
}

// NewPacer returns a Pacer on clock with backoff; notifier may be nil;
// closing, if not nil, ends every sleep when it is closed.
func NewPacer[T Stopper](clock Clock[T], backoff func(int) time.Duration, notifier driver.Notifier, closing <-chan struct{}) Pacer[T] {
	return Pacer[T]{clock: clock, backoff: backoff, notifier: notifier, closing: closing}
}

// Failures returns how many attempts Pause was called after.
func (p *Pacer[T]) Failures() int { return p.failures }

// Pause sleeps after a failed attempt of key, before the next one. It
// reports false if ctx ended first. contended says another owner held the
// key, for remaining (negative: unknown); retry is the store's hint
// (driver.ContendedError.Retry): when > 0 the pause is retry minus a little
// jitter (never above it), instead of the backoff and remaining.
//
// On the first contention with a store that notifies, it subscribes and
// returns at once: the retry that follows closes the gap between the failed
// attempt and the subscription, so no release is missed. Afterwards it
// sleeps until a release is announced or the holder's lease would expire,
// whichever comes first; the expiry wake-up covers a missed message.
func (p *Pacer[T]) Pause(ctx context.Context, key string, contended bool, remaining, retry time.Duration) bool {
	p.failures++
	if contended && p.cancel == nil && p.notifier != nil {
		if ch, cancel, err := p.notifier.Subscribe(ctx, key); err == nil {
			p.wake, p.cancel = ch, cancel
			return ctx.Err() == nil
		}
	}
	return p.Sleep(ctx, p.delay(contended, remaining, retry))
}

// Sleep waits for d, a release announcement or closing. It reports false if
// ctx ended first.
func (p *Pacer[T]) Sleep(ctx context.Context, d time.Duration) bool {
	elapsed := make(chan struct{})
	t := p.clock.AfterFunc(d, func() { close(elapsed) })
	defer t.Stop()
	select {
	case <-elapsed:
	case <-p.wake:
	case <-p.closing:
	case <-ctx.Done():
		return false
	}
	return true
}

func (p *Pacer[T]) delay(contended bool, remaining, retry time.Duration) time.Duration {
	q, inLine := p.notifier.(Poller)
	polls := inLine && q.Polls()
	if contended && retry > 0 && (polls || !inLine || p.wake == nil) {
		// The store expects the next attempt within retry: come a little
		// early (up to a tenth), never late.
		if j := retry / 10; j > 0 {
			return retry - rand.N(j)
		}
		return retry
	}
	d := p.backoff(p.failures)
	if !contended || remaining < 0 {
		return d
	}
	// The holder's expiry, plus a little jitter so that the waiters of one
	// holder do not all retry at the same instant.
	expiry := remaining + rand.N(time.Millisecond+remaining/50)
	if (p.wake != nil && !polls) || expiry < d {
		return expiry
	}
	return d
}

// A Poller is a Notifier whose subscriber may have to poll meanwhile: a
// place in a line of waiters that wakes them in turn on a store that
// cannot notify, where the first of them polls for the others.
type Poller interface {
	driver.Notifier
	// Polls reports whether the subscriber polls (with the backoff) rather
	// than sleeping until it is woken or the holder's lease would expire.
	Polls() bool
}

// Stop ends the subscription, if any.
func (p *Pacer[T]) Stop() {
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
}
