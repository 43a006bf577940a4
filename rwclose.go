package dlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"example.com/dlock/driver"
)

// rwExtender is the RWLocks' side of renewal (lease.Extender): one ExtendRW
// per holding due, all at once, so that a hung call holds up no other.
type rwExtender struct{ store driver.RWMutex }

// ExtendMany implements lease.Extender.
func (e rwExtender) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	results := make([]driver.ExtendResult, len(reqs))
	extend := func(i int) {
		q := reqs[i]
		g, err := e.store.ExtendRW(ctx, q.Key, q.Token, q.TTL)
		results[i] = driver.ExtendResult{Grant: driver.Grant{Fence: g.Fence, Holds: 1, TTL: g.TTL}, Err: err}
	}
	var wg sync.WaitGroup
	for i := 1; i < len(reqs); i++ {
		wg.Go(func() { extend(i) })
	}
	extend(0)
	wg.Wait()
	return results
}

// giveBack releases token's holding of key in the background, not before
// notBefore, retrying a release without an answer with backoff until the
// store confirms or says the token holds nothing, for at most the lease
// (by then the holding has expired anyway); then it calls done if not nil.
// Close waits for it.
func (l *RWLocks) giveBack(key, token string, ttl time.Duration, notBefore time.Time, done func()) {
	clk := l.cfg.clock
	wait := max(0, notBefore.Sub(clk.Now()))
	l.bg.goCounted(func() {
		if done != nil {
			defer done()
		}
		ctx, cancel := context.WithTimeout(l.bgCtx, wait+max(ttl, time.Second))
		defer cancel()
		if wait > 0 && !sleep(ctx, clk, wait, nil) {
			return
		}
		for fails := 1; ; fails++ {
			err := classify(l.store.ReleaseRW(ctx, key, token))
			if err == nil || isNotHeld(err) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrRefused) {
				return
			}
			if !sleep(ctx, clk, giveBackRetry(fails), nil) {
				return
			}
		}
	})
}

// goCounted runs f in its own goroutine, counted as a give-back that
// drained waits for.
func (b *bgState) goCounted(f func()) {
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

// Close releases every holding still held (their Err then matches
// ErrNotHeld), stops their renewal, ends the waits of RLock and Lock (which
// then return ErrNotAcquired and ErrInvalid) and waits for the background
// give-backs, cancelling them if ctx ends first. Later calls return
// ErrInvalid. It returns the first release error, or ctx's; what was not
// confirmed expires at the end of its lease. It does not close the store.
// Closing twice returns nil.
func (l *RWLocks) Close(ctx context.Context) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	if l.closed.Swap(true) {
		return nil
	}
	close(l.closing)
	l.mu.Lock()
	held := make([]*RWHolding, 0, len(l.held))
	for h := range l.held {
		held = append(held, h)
	}
	l.mu.Unlock()
	var first error
	for _, h := range held {
		if err := h.Release(ctx); err != nil && first == nil && !isNotHeld(err) {
			first = err
		}
	}
	select {
	case <-l.bg.drained():
	case <-ctx.Done():
		l.bgStop()
		<-l.bg.drained()
		if first == nil {
			first = ctx.Err()
		}
	}
	l.bgStop()
	return first
}

// rwCtxKey maps to the *rwCtx of the innermost RDo or Do whose function got
// the context.
type rwCtxKey struct{}

// rwCtx is a holding that a context carries, and the one it derives from.
type rwCtx struct {
	h     *RWHolding
	outer *rwCtx
}

// RDo takes a read holding of key as RLock does, runs fn with a context
// that is cancelled, cause ErrLost, if the holding is lost, and releases
// the holding when fn returns or panics. It returns the acquisition error
// (fn did not run), or fn's error joined with the release's, matching
// ErrLost if the holding was lost while fn ran. Within fn, Lock, TryLock and
// Do of key with fn's context return ErrUpgrade at once, and RLock, TryRLock
// and RDo ErrInvalid. A nil fn returns ErrInvalid before any I/O.
func (l *RWLocks) RDo(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) error {
	return l.do(ctx, key, driver.RWRead, fn, opts)
}

// Do takes the write holding of key as Lock does and runs fn as RDo does;
// within fn, every acquisition of key with fn's context returns ErrInvalid
// at once.
func (l *RWLocks) Do(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) error {
	return l.do(ctx, key, driver.RWWrite, fn, opts)
}

func (l *RWLocks) do(ctx context.Context, key string, mode driver.RWMode, fn func(context.Context) error, opts []Option) (err error) {
	if fn == nil {
		return invalidf("nil function")
	}
	h, err := l.lock(ctx, key, mode, false, opts)
	if err != nil {
		return err
	}
	outer, _ := ctx.Value(rwCtxKey{}).(*rwCtx)
	fctx, cancel := context.WithCancelCause(context.WithValue(ctx, rwCtxKey{}, &rwCtx{h, outer}))
	stop := h.v.OnLost(cancel)
	returned := false
	defer func() { // deferred: a recovered panic must not leave the key held
		stop()
		cancel(nil)
		rctx, rcancel := releaseContext(ctx, h.ttl)
		rerr := h.Release(rctx)
		rcancel()
		if returned {
			err = joinLine(err, rerr)
		}
	}()
	err = fn(fctx)
	returned = true
	return err
}
