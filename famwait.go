package dlock

import (
	"context"
	"errors"
	"time"

	"example.com/dlock/internal/lease"
)

// famWait is the primitive's side of the attempts of one blocking
// acquisition of a Semaphores or RWLocks, as the wait loop (famAcquire)
// drives them. Only functions: the loop calls them and keeps none, so that
// they stay on the caller's stack (a string here would leak it all).
type famWait[H comparable] struct {
	// attempt makes one acquisition for token, bounded by ctx.
	attempt func(ctx context.Context, token string) (H, error)
	// refusal reports whether an attempt's err says the key is taken (so
	// the token holds nothing), and the longest pause before the next
	// attempt (-1: the backoff's).
	refusal func(err error) (taken bool, remaining time.Duration)
}

// famAcquire is famLoop, with its wait's events (of kind) if cfg has an
// Observer. It returns the call's context: ctx, or the one a CallObserver
// gave the call named name.
func famAcquire[H granted](f *famCore, ctx context.Context, name, key string, cfg config, kind Kind, w famWait[H]) (context.Context, H, error) {
	if cfg.obs == nil {
		h, err := famLoop(f, ctx, key, cfg, kind, w)
		return ctx, h, err
	}
	ctx = beginCall(ctx, cfg.obs, name, kind, key)
	start := waitStart(ctx, cfg.obs, cfg.clock, kind, key)
	h, err := famLoop(f, ctx, key, cfg, kind, w)
	var fence uint64
	var n int
	var none H
	if h != none {
		fence, n = h.grant()
	}
	waitEnd(ctx, cfg.obs, cfg.clock, kind, key, start, fence, n, err)
	return ctx, h, err
}

// granted is a holding as its wait's EventWaitEnd reports it.
type granted interface {
	comparable
	grant() (fence uint64, count int)
}

// famLoop makes attempts for key until one succeeds, an error is final,
// or the wait ends: ctx, the wait bound (cfg.wait; 0 for one attempt), or
// Close.
// A failed wait returns the zero H and an error matching ErrNotAcquired
// (or ErrInvalid), first giving back in the background what an attempt
// without an answer may have left.
func famLoop[H comparable](f *famCore, ctx context.Context, key string, cfg config, kind Kind, w famWait[H]) (H, error) {
	var none H
	if ctx.Err() != nil {
		return none, waitErrorOf(ctx, ctx, f.noun, key, waitDetail(kind), nil)
	}
	wctx := ctx
	if cfg.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, cfg.wait, errWaitElapsed)
		defer cancel()
	}
	token := newToken()
	pace := lease.NewPacer[Timer](cfg.clock, cfg.backoff, f.notifier, f.closing)
	defer pace.Stop()
	var last error
	unsure := false // an attempt got no answer: token may hold key
	for {
		if f.closed.Load() {
			return none, f.failed(key, token, unsure, cfg, notAcquired(f.errClosed))
		}
		h, err := w.attempt(wctx, token)
		if err == nil {
			return h, nil
		}
		taken, remaining := w.refusal(err)
		unsure = unsure || (!taken && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrRefused))
		switch {
		case errors.Is(err, ErrInvalid):
			return none, f.failed(key, token, unsure, cfg, err)
		case errors.Is(err, ErrRefused) || (cfg.wait == 0 && wctx.Err() == nil):
			return none, f.failed(key, token, unsure, cfg, notAcquired(err))
		case wctx.Err() != nil:
			return none, f.failed(key, token, unsure, cfg, waitErrorOf(ctx, wctx, f.noun, key, waitDetail(kind), last))
		}
		last = err
		if cfg.onRetry != nil {
			cfg.onRetry(pace.Failures()+1, err)
		}
		if !pace.Pause(wctx, key, taken, remaining, 0) {
			return none, f.failed(key, token, unsure, cfg, waitErrorOf(ctx, wctx, f.noun, key, waitDetail(kind), last))
		}
	}
}

// waitDetail is what a wait error of kind says after the key: a read-write
// lock's mode.
func waitDetail(kind Kind) string {
	if kind == KindRead || kind == KindWrite {
		return " (" + string(kind) + ")"
	}
	return ""
}
