package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/chaos/history"
	"example.com/dlock/internal/faultproxy"
)

// step makes one operation of the worker's role.
func (w *worker) step(ctx context.Context) {
	switch w.role {
	case "plain":
		w.plain(ctx)
	case "reentry":
		if w.rng.IntN(2) == 0 {
			w.reentryLock(ctx)
		} else {
			w.reentryDo(ctx)
		}
	case "extend":
		w.extend(ctx)
	case "commit":
		w.commit(ctx)
	case "cancel":
		if w.rng.IntN(2) == 0 {
			w.cancelWait(ctx, w.key)
		} else {
			w.cancelThenTry(ctx)
		}
	case "panic":
		w.panicDo(ctx)
	}
}

// ttl draws a lease length of 1–2 × base.
func (w *worker) ttl() time.Duration {
	return w.base + time.Duration(w.rng.Int64N(int64(w.base)))
}

// between draws a duration in [lo, hi).
func (w *worker) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)+1))
}

// hold is the work done under l: between lo and hi (at most 0.8) of its
// remaining validity, so that a correct lease does not expire under its
// holder while a lease that believes in more validity than the store keeps
// (the defects under test) is caught holding past the store's expiry.
func (w *worker) hold(l *dlock.Lease, lo, hi float64) {
	f := lo + w.rng.Float64()*(hi-lo)
	time.Sleep(time.Duration(f * float64(l.Remaining()))) // the critical section's work
}

func leaseOpt(ttl time.Duration, renew bool) dlock.Option {
	if renew {
		return dlock.WithAutoRenew(ttl)
	}
	return dlock.WithTTL(ttl)
}

// plain is a contender on any of the keys: one try, a little work, release.
func (w *worker) plain(ctx context.Context) {
	key := composedKeys[w.rng.IntN(len(composedKeys))]
	l, err := w.tryLock(ctx, key, w.ttl())
	if err != nil {
		return
	}
	w.hold(l, 0, 0.2)
	_ = w.release(ctx, l)
}

// reentryLock: an outer lease (fixed or renewed) re-entered through
// ContextWithOwner with a TTL shorter or longer than the outer one (S2: a
// shorter re-entry shortened the outer holding in the store). In the full
// range the inner lease may also be renewed with its own, shorter period,
// or extended shorter than the outer one, and the outer one may be released
// first (issue 23: each holding's renewal or Extend set the shared record's
// expiry outright, under the other's validity). The holding released last
// goes on holding after the other one ended.
func (w *worker) reentryLock(ctx context.Context) {
	ttl, renew := w.ttl(), w.rng.IntN(2) == 0
	octx := dlock.ContextWithOwner(ctx, dlock.NewOwner())
	outer, err := w.lockRec(octx, ttl, renew, leaseOpt(ttl, renew), dlock.WithWait(ttl))
	if err != nil {
		return
	}
	w.hold(outer, 0, 0.25)
	d := w.innerTTL(ttl)
	renewInner := w.full && w.rng.IntN(3) == 0
	inner, err := w.lockRec(octx, d, renewInner, leaseOpt(d, renewInner), dlock.WithWait(0))
	if err != nil {
		w.hold(outer, 0.3, 0.8)
		w.releaseRec(ctx, outer)
		return
	}
	w.hold(inner, 0, 0.3)
	if w.full && w.rng.IntN(2) == 0 {
		w.extendRec(ctx, inner, w.shortTTL(min(d, ttl))) // shorter than the outer holding
	}
	first, last := inner, outer
	if w.full && w.rng.IntN(4) == 0 {
		first, last = outer, inner
	}
	w.releaseRec(ctx, first)
	w.hold(last, 0.3, 0.8) // the other holding must still be in the store
	w.releaseRec(ctx, last)
}

// innerTTL is a re-entry's TTL: in the full range, half of the time
// shorter than a third of the outer lease (so shorter than what is left of
// it even right after a renewal), else longer than the outer lease, as in
// the safe range.
func (w *worker) innerTTL(outer time.Duration) time.Duration {
	if w.full && w.rng.IntN(2) == 0 {
		return w.shortTTL(outer)
	}
	return w.between(outer, 2*outer)
}

// shortTTL draws from a tenth to a third of ttl.
func (w *worker) shortTTL(ttl time.Duration) time.Duration {
	return w.between(max(ttl/10, dlock.MinTTL), ttl/3)
}

// reentryDo: the same through nested Do calls, as in the S2 report
// (a renewed Do re-entered by a Do with a short WithTTL).
func (w *worker) reentryDo(ctx context.Context) {
	ttl := w.ttl()
	tok := fmt.Sprintf("do-%d-%d", w.client, w.n)
	_ = w.doRec(ctx, tok, ttl, true, func(fctx context.Context) error {
		time.Sleep(w.between(0, ttl/4)) // work before the nested call
		d := w.innerTTL(ttl)
		renewInner := w.full && w.rng.IntN(2) == 0 // issue 23 b: a nested Do renewed with a short period
		_ = w.doRec(fctx, tok, d, renewInner, func(context.Context) error {
			time.Sleep(w.between(0, d/4)) // the nested call's work
			return nil
		}, leaseOpt(d, renewInner))
		time.Sleep(w.between(ttl/4, ttl/2)) // the outer holding must still be in the store
		return nil
	}, dlock.WithAutoRenew(ttl), dlock.WithWait(ttl))
}

// extend: Extend shorter and longer than the lease (S1: the store expiry
// shrank while the lease kept its longer validity), on a fixed or a
// renewed lease.
func (w *worker) extend(ctx context.Context) {
	ttl, renew := w.ttl(), w.rng.IntN(2) == 0
	l, err := w.lockRec(ctx, ttl, renew, leaseOpt(ttl, renew), dlock.WithWait(ttl))
	if err != nil {
		return
	}
	switch {
	case !renew:
		w.extendFixed(ctx, l, ttl)
	case w.full && w.rng.IntN(2) == 0:
		w.extendRec(ctx, l, w.shortTTL(ttl)) // shorter than the renewal TTL
		w.hold(l, 0.3, 0.8)
	default:
		w.extendRenewed(ctx, l, ttl)
	}
	w.releaseRec(ctx, l)
}

// extendFixed extends a fixed lease up to three times, longer than what is
// left of it or, in the full range, shorter (the last time always).
func (w *worker) extendFixed(ctx context.Context, l *dlock.Lease, ttl time.Duration) {
	n := 1 + w.rng.IntN(3)
	for i := range n {
		w.hold(l, 0, 0.25)
		d := l.Remaining() + w.between(dlock.MinTTL, ttl)
		if w.full && (i == n-1 || w.rng.IntN(2) == 0) {
			d = w.shortTTL(ttl)
		}
		w.extendRec(ctx, l, d)
	}
	w.hold(l, 0.3, 0.8)
}

// extendRenewed extends a renewed lease far beyond its renewal TTL and,
// after its first renewal, in the full range cuts it off from the store for
// twice that TTL, which only the extension covers (S1's variant: renewal
// put the key back to its original TTL).
func (w *worker) extendRenewed(ctx context.Context, l *dlock.Lease, ttl time.Duration) {
	w.extendRec(ctx, l, 5*ttl)
	time.Sleep(w.between(ttl/2, 2*ttl/3)) // past the first renewal (every ttl/3)
	if !w.full || l.Err() != nil {
		w.hold(l, 0, 0.1)
		return
	}
	w.proxy.Blackhole(faultproxy.Upstream, true)
	sleepCtx(ctx, 2*ttl) // the cut under test
	w.proxy.Clear()
}

// commit: read with the grant, Commit value−1 (S5: Commit reported ErrLost
// after the write landed, when go-redis replayed it). In the full range
// half of the Commits lose their reply, so that the client times out and
// replays the call.
func (w *worker) commit(ctx context.Context) {
	ttl := w.ttl()
	l, err := w.lockRec(ctx, ttl, false, dlock.WithTTL(ttl), dlock.WithRead(commitRes), dlock.WithWait(ttl))
	if err != nil {
		return
	}
	v, _ := l.Value()
	n, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil || !l.ValueRead() {
		w.releaseRec(ctx, l)
		return
	}
	w.hold(l, 0, 0.1)
	var cleared chan struct{}
	if w.full && w.rng.IntN(2) == 0 {
		cleared = make(chan struct{})
		w.proxy.Blackhole(faultproxy.Downstream, true)
		// The reply is dropped; the link is back well before go-redis's read
		// times out, so its replay gets an answer.
		time.AfterFunc(commitReadTimeout/4, func() { w.proxy.Clear(); close(cleared) })
	}
	wop := w.rec.Invoke(w.client, history.Write, commitRes)
	wop.Fence, wop.Value, wop.ReqID = l.Fence(), n-1, fmt.Sprintf("c%d-r%d", w.client, w.n)
	rop := w.releaseOp(l)
	err = l.Commit(ctx, strconv.FormatInt(n-1, 10))
	switch {
	case err == nil:
		w.rec.Finish(wop, history.Ok)
	case errors.Is(err, dlock.ErrLost) && !errors.Is(err, dlock.ErrUnavailable):
		wop.Err = err.Error()
		w.rec.Finish(wop, history.Failed) // documented: nothing was written
	default:
		wop.Err = err.Error()
		w.rec.Finish(wop, history.Unknown)
	}
	w.finishRelease(rop, err)
	if cleared != nil {
		<-cleared // the timer always fires
	}
}

// cancelWait: a wait on key whose context ends after a random time, in the
// full range often while an attempt's reply is on its way (L1: the grant
// stayed in the store for the whole TTL under a token nobody had). The
// wait's holding, if any, must be gone within cleanupBound of the call's
// return. It reports whether the outcome was unknown.
func (w *worker) cancelWait(ctx context.Context, key string) bool {
	ttl := 2 * w.ttl()
	d := w.between(time.Millisecond, 50*time.Millisecond)
	if w.full {
		d = w.between(replyDelay/4, 2*replyDelay)
	}
	cctx, cancel := context.WithTimeout(ctx, d)
	op := w.rec.Invoke(w.client, history.Acquire, key)
	op.TTL, op.Bound = ttl, cleanupBound
	l, err := w.locks.Lock(cctx, key, dlock.WithTTL(ttl))
	cancel()
	w.finishAcquire(op, l, err)
	if err == nil {
		w.hold(l, 0, 0.05)
		w.releaseRec(ctx, l)
	}
	return op.Outcome == history.Unknown
}

// cancelThenTry: a cancelled wait on a key nobody else uses, so that it is
// often free and the attempt cut short is a grant; once the wait's holding
// must be gone (cleanupBound, plus the checker's slack), one try on the
// same key, whose refusal nothing but a ghost explains.
func (w *worker) cancelThenTry(ctx context.Context) {
	if !w.cancelWait(ctx, cancelKey) {
		return
	}
	time.Sleep(cleanupBound + slack + 20*time.Millisecond) // the bound under test
	if l, err := w.tryLock(ctx, cancelKey, w.ttl()); err == nil {
		_ = w.release(ctx, l)
	}
}

// errAppPanic is what a Do function of the panic worker panics with; the
// worker recovers it and goes on (as net/http recovers a handler's panic).
var errAppPanic = errors.New("chaos: panic inside Do")

// errAppFailed is what the same function returns in the safe range.
var errAppFailed = errors.New("chaos: Do's function failed")

// panicDo: Do whose function panics, recovered by this goroutine (L5: the
// lock leaked, renewed forever). The safe range returns an error instead.
func (w *worker) panicDo(ctx context.Context) {
	ttl := w.ttl()
	tok := fmt.Sprintf("do-%d-%d", w.client, w.n)
	_ = w.doRec(ctx, tok, ttl, true, func(context.Context) error {
		time.Sleep(w.between(0, ttl/8)) // work before the failure
		if w.full {
			panic(errAppPanic)
		}
		return errAppFailed
	}, dlock.WithAutoRenew(ttl), dlock.WithWait(ttl))
}
