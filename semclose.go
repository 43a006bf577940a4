package dlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"example.com/dlock/driver"
)

// permitExtender is the Semaphores' side of renewal (lease.Extender): one
// ExtendPermits per permit due, all at once, so that a hung call holds up
// no other.
type permitExtender struct{ store driver.Semaphore }

// ExtendMany implements lease.Extender.
func (e permitExtender) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	results := make([]driver.ExtendResult, len(reqs))
	extend := func(i int) {
		q := reqs[i]
		g, err := e.store.ExtendPermits(ctx, q.Key, q.Token, q.TTL)
		results[i] = driver.ExtendResult{Grant: driver.Grant{Fence: g.Fence, Holds: g.Permits, TTL: g.TTL}, Err: err}
	}
	var wg sync.WaitGroup
	for i := 1; i < len(reqs); i++ {
		wg.Go(func() { extend(i) })
	}
	extend(0)
	wg.Wait()
	return results
}

// giveBack releases token's permits of key in the background (see
// giveBackThen).
func (s *Semaphores) giveBack(key, token string, ttl time.Duration, notBefore time.Time) {
	s.giveBackThen(key, token, ttl, notBefore, nil)
}

// giveBackThen releases token's permits of key in the background, not
// before notBefore, retrying a release without an answer with backoff until
// the store confirms or says the token holds nothing, for at most the lease
// (by then the holding has expired anyway); then it calls done if not nil.
// Close waits for it.
func (s *Semaphores) giveBackThen(key, token string, ttl time.Duration, notBefore time.Time, done func()) {
	clk := s.cfg.clock
	wait := max(0, notBefore.Sub(clk.Now()))
	s.run(func() {
		if done != nil {
			defer done()
		}
		ctx, cancel := context.WithTimeout(s.bgCtx, wait+max(ttl, time.Second))
		defer cancel()
		if wait > 0 && !sleep(ctx, clk, wait, nil) {
			return
		}
		for fails := 1; ; fails++ {
			err := classify(s.store.ReleasePermits(ctx, key, token))
			if err == nil || isNotHeld(err) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrRefused) {
				return
			}
			if !sleep(ctx, clk, giveBackRetry(fails), nil) {
				return
			}
		}
	})
}

// bgState counts the background give-backs, for Close to wait for.
type bgState struct {
	mu      sync.Mutex
	pending int
	idle    chan struct{} // closed when pending drops to 0, if made
}

// run runs f in its own goroutine, counted as a give-back Close waits for.
func (s *Semaphores) run(f func()) {
	b := &s.bg
	b.mu.Lock()
	b.pending++
	b.mu.Unlock()
	go func() {
		defer func() {
			b.mu.Lock()
			if b.pending--; b.pending == 0 && b.idle != nil {
				close(b.idle)
				b.idle = nil
			}
			b.mu.Unlock()
		}()
		f()
	}()
}

// drained returns a channel closed once no give-back is pending.
func (b *bgState) drained() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == 0 {
		return closedChan
	}
	if b.idle == nil {
		b.idle = make(chan struct{})
	}
	return b.idle
}

// Close releases every permit still held (their Err then matches
// ErrNotHeld), stops their renewal, ends the waits of Acquire (which then
// return ErrNotAcquired and ErrInvalid) and waits for the background
// give-backs, cancelling them if ctx ends first. Later calls return
// ErrInvalid. It returns the first release error, or ctx's; what was not
// confirmed expires at the end of its lease. It does not close the store.
// Closing twice returns nil.
func (s *Semaphores) Close(ctx context.Context) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	if s.closed.Swap(true) {
		return nil
	}
	close(s.closing)
	s.mu.Lock()
	held := make([]*Permit, 0, len(s.held))
	for p := range s.held {
		held = append(held, p)
	}
	s.mu.Unlock()
	var first error
	for _, p := range held {
		if err := p.Release(ctx); err != nil && first == nil && !isNotHeld(err) {
			first = err
		}
	}
	select {
	case <-s.bg.drained():
	case <-ctx.Done():
		s.bgStop()
		<-s.bg.drained()
		if first == nil {
			first = ctx.Err()
		}
	}
	s.bgStop()
	return first
}
