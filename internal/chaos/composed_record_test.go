package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/chaos/check"
	"example.com/dlock/internal/chaos/history"
)

// How the composed traffic records what it did (see composed_test.go).

// lockRec makes one recorded Lock call on the worker's key with opts; ttl
// and renew describe the lease they ask for.
func (w *worker) lockRec(ctx context.Context, ttl time.Duration, renew bool, opts ...dlock.Option) (*dlock.Lease, error) {
	op := w.rec.Invoke(w.client, history.Acquire, w.key)
	op.TTL, op.Renew = ttl, renew
	l, err := w.locks.Lock(ctx, w.key, opts...)
	w.finishAcquire(op, l, err)
	return l, err
}

// extendRec records l.Extend(d). Anything but success is recorded as
// unknown: a lease that was lost may or may not have asked the store.
func (a *app) extendRec(ctx context.Context, l *dlock.Lease, d time.Duration) {
	op := a.rec.Invoke(a.client, history.Extend, l.Key())
	op.Token, op.TTL = history.TokenID(l.Token()), d
	err := l.Extend(ctx, d)
	op.ValidUntil = history.Mono(l.ValidUntil())
	if err != nil {
		op.Err = err.Error()
		a.rec.Finish(op, history.Unknown)
		return
	}
	a.rec.Finish(op, history.Ok)
}

// releaseOp starts the record of l's release, with the validity l believes
// in at that moment.
func (a *app) releaseOp(l *dlock.Lease) *history.Op {
	op := a.rec.Invoke(a.client, history.Release, l.Key())
	op.Token, op.ValidUntil = history.TokenID(l.Token()), history.Mono(l.ValidUntil())
	return op
}

// finishRelease records a release's outcome: anything but success is
// unknown (a release of a lost lease may or may not reach the store).
func (a *app) finishRelease(op *history.Op, err error) {
	if err != nil {
		op.Err = err.Error()
		a.rec.Finish(op, history.Unknown)
		return
	}
	a.rec.Finish(op, history.Ok)
}

func (a *app) releaseRec(ctx context.Context, l *dlock.Lease) {
	op := a.releaseOp(l)
	a.finishRelease(op, l.Release(ctx))
}

// doRec runs Do(ctx, w.key, fn, opts) and records it under tok (Do's
// function cannot see its lease, so its token and fence are not known; tok
// names the holding, nested Do calls share it, and the fence is recorded as
// 0, unobserved). The acquire lasts from the call to fn's start, and the
// holding's validity, as fn believed it, to fn's return or to the
// cancellation of fn's context, whichever came first. A panic with
// errAppPanic is recovered here, after Do returned, and its release
// recorded as done: Do promises to release before re-panicking.
func (w *worker) doRec(ctx context.Context, tok string, ttl time.Duration, renew bool, fn func(context.Context) error, opts ...dlock.Option) (err error) {
	a := w.app
	acq := a.rec.Invoke(a.client, history.Acquire, w.key)
	acq.Token, acq.TTL, acq.Renew = tok, ttl, renew
	var rel *history.Op
	defer func() {
		p := recover()
		if pe, _ := p.(error); p != nil && !errors.Is(pe, errAppPanic) {
			panic(p) // not ours: a bug to report, not traffic
		}
		if rel == nil { // fn never ran
			if err != nil {
				a.finishAcquire(acq, nil, err)
			}
			return
		}
		acq.Outcome = history.Ok
		a.rec.Add(*acq)
		var relErr error // the release's part of Do's error, if any
		if p == nil && (errors.Is(err, dlock.ErrLost) || errors.Is(err, dlock.ErrNotHeld) || errors.Is(err, dlock.ErrUnavailable)) {
			relErr = err
		}
		a.finishRelease(rel, relErr) // after a panic: released, as Do promises
	}()
	return a.locks.Do(ctx, w.key, func(fctx context.Context) error {
		acq.Return = history.Now()
		if l, ok := dlock.LeaseFromContext(fctx); ok && a.seen != nil {
			a.seen.known(history.TokenID(l.Token()))
		}
		var lostAt atomic.Int64
		lost := make(chan struct{})
		stop := context.AfterFunc(fctx, func() { lostAt.Store(history.Now()); close(lost) })
		defer func() {
			end := history.Now()
			if !stop() { // fn's context ended while it ran: the belief ended then
				<-lost
				end = lostAt.Load()
			}
			acq.ValidUntil = end
			rel = a.rec.Invoke(a.client, history.Release, w.key)
			rel.Token, rel.ValidUntil = tok, end
		}()
		return fn(fctx)
	}, opts...)
}

// finishAcquire records an acquisition's outcome as tryLock does: a wait
// ended by its context is unknown even if the error names a refusal, since
// the error reports the last answer and an attempt cut short after it may
// have been applied. A refusal by the local queue (Remaining < 0) never
// reached the store and is not recorded.
func (a *app) finishAcquire(op *history.Op, l *dlock.Lease, err error) {
	var ce *driver.ContendedError
	switch {
	case err == nil:
		op.Token, op.Fence, op.ValidUntil = history.TokenID(l.Token()), l.Fence(), history.Mono(l.ValidUntil())
		a.rec.Finish(op, history.Ok)
	case errors.As(err, &ce) && ce.Remaining < 0:
	case isContended(err):
		op.Token, op.Err = fmt.Sprintf("fail-%d-%d", a.client, a.ghosts), check.Contended
		a.ghosts++
		a.rec.Finish(op, history.Failed)
		if a.seen != nil {
			a.seen.look(context.Background(), op.Key) // the caller's context may have ended
		}
	default:
		op.Token, op.Err = fmt.Sprintf("ghost-%d-%d", a.client, a.ghosts), err.Error()
		a.ghosts++
		a.rec.Finish(op, history.Unknown)
	}
}
