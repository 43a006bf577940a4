package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/lease"
)

// guardRun is one execution of a Guard: the in-flight record's lease,
// renewed through the Guard's renewer while the function runs.
type guardRun struct {
	g       *Guard
	id      driver.RecordID
	token   string
	fence   uint64
	v       lease.Validity[Timer]
	renewal lease.Slot // guarded by the renewer's mutex
}

// execute runs fn as the executor of id (b: its BeginRecord answer, sent
// at start) and completes or abandons the record (see Do); when inTx, fn
// completed the record itself (see DoTx).
func (g *Guard) execute(ctx context.Context, id driver.RecordID, token string, b driver.RecordBegin, start time.Time, inTx bool, fn func(context.Context, Execution) ([]byte, error)) (res Result, err error) {
	r := &guardRun{g: g, id: id, token: token, fence: b.Fence, renewal: lease.NewSlot()}
	r.v.Init(g.cfg.clock, lease.ValidUntil(start, b.Remaining, g.cfg.ttl), g.cfg.ttl, r.holder())
	g.runs.byToken.Store(token, r)
	if g.cfg.renew {
		g.runs.renewer.Add(r.renewable(), g.cfg.ttl)
	}
	fctx, cancel := context.WithCancelCause(ctx)
	stopHook := r.v.OnLost(cancel)
	done := false
	defer func() {
		stopHook()
		cancel(nil)
		r.end()
		if !done { // fn panicked
			r.abandon(ctx)
		}
	}()
	var ran time.Duration
	defer func() { // reports how the call ended, once fn has run
		if g.cfg.obs != nil {
			g.result(ctx, id.Key, runOutcome(done, b.TookOver, res, err), b.Fence, ran, err)
		}
	}()
	fnStart := g.cfg.clock.Now()
	val, err := fn(fctx, Execution{Scope: id.Scope, Key: id.Key, Fence: b.Fence, TookOver: b.TookOver})
	ran, done = g.cfg.clock.Now().Sub(fnStart), true
	r.end()
	if err != nil {
		r.abandon(ctx)
		if inTx && errors.Is(err, ErrStaleFence) {
			err = tidy(fmt.Errorf("%w: idempotency key %q: the execution was taken over and its transaction not committed: %w", ErrLost, id.Key, err))
		}
		return Result{}, err
	}
	res = Result{Value: val, Fence: b.Fence}
	if inTx {
		return res, nil
	}
	if err = driver.ValidateResult(val); err != nil {
		r.abandon(ctx)
		return res, err
	}
	cctx, ccancel := finishContext(ctx, g.cfg.ttl)
	defer ccancel()
	switch err = classify(g.store.CompleteRecord(cctx, id, token, b.Fence, val)); {
	case err == nil:
		return res, nil
	case errors.Is(err, ErrStaleFence):
		err = tidy(fmt.Errorf("%w: idempotency key %q: the execution was taken over and its result not stored: %w", ErrLost, id.Key, err))
	default:
		err = tidy(fmt.Errorf("dlock: idempotency key %q: completing the record: %w", id.Key, err))
	}
	return res, err
}

// runOutcome is the outcome of an execution that returned res and err
// (done: fn returned rather than panicked; tookOver: it took over).
func runOutcome(done, tookOver bool, res Result, err error) Outcome {
	switch {
	case !done || err != nil && res.Fence == 0 && !errors.Is(err, ErrLost):
		return OutcomeFailed
	case errors.Is(err, ErrLost):
		return OutcomeStale
	case err != nil:
		var big *driver.ResultTooLargeError
		if errors.As(err, &big) {
			return OutcomeFailed
		}
		return waitOutcome(err) // the completion went unanswered
	case tookOver:
		return OutcomeTookOver
	}
	return OutcomeExecuted
}

// finishContext bounds the completion or abandon of a record: ctx's
// values, not its end (an execution whose caller left still records its
// outcome), for at most the lease or a second.
func finishContext(ctx context.Context, ttl time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), max(ttl, time.Second))
}

// end stops the run's renewal and forgets it. It may be called twice.
func (r *guardRun) end() {
	r.g.runs.renewer.Remove(r.renewable())
	_, _, _ = r.v.Release(r.holder())
	r.g.runs.byToken.Delete(r.token)
}

// abandon removes the record so that a retry runs the function again;
// best effort: a record left behind is taken over once its lease passes.
func (r *guardRun) abandon(ctx context.Context) {
	actx, cancel := finishContext(ctx, r.g.cfg.ttl)
	defer cancel()
	_ = r.g.store.AbandonRecord(actx, r.id, r.token, r.fence)
}

// recordExtender is the Guard's side of renewal (lease.Extender): one
// ExtendRecord per execution due, all at once.
type recordExtender struct {
	store driver.Idempotency
	runs  *guardRuns
}

// ExtendMany implements lease.Extender. A run that ended meanwhile is
// answered as stale, which ends nothing more.
func (e recordExtender) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	results := make([]driver.ExtendResult, len(reqs))
	extend := func(i int) {
		q := reqs[i]
		v, ok := e.runs.byToken.Load(q.Token)
		if !ok {
			results[i].Err = driver.StaleExecutor(false)
			return
		}
		r := v.(*guardRun)
		err := e.store.ExtendRecord(ctx, r.id, q.Token, r.fence, q.TTL)
		results[i] = driver.ExtendResult{Grant: driver.Grant{Fence: r.fence, Holds: 1, TTL: q.TTL}, Err: err}
	}
	var wg sync.WaitGroup
	for i := 1; i < len(reqs); i++ {
		wg.Go(func() { extend(i) })
	}
	extend(0)
	wg.Wait()
	return results
}

// runHolder is a run as the lease engine sees its end (lease.Holder).
type runHolder guardRun

func (r *guardRun) holder() *runHolder { return (*runHolder)(r) }

// LostError implements lease.Holder.
func (h *runHolder) LostError(cause error) error {
	return tidy(fmt.Errorf("%w: idempotency key %q: %w", ErrLost, h.id.Key, cause))
}

// Ended implements lease.Holder.
func (h *runHolder) Ended() {}

// Lost implements lease.Holder: renewal stops (Do's hook cancels fn).
func (h *runHolder) Lost() { h.g.runs.renewer.Remove((*guardRun)(h).renewable()) }

// Expire implements lease.Holder.
func (h *runHolder) Expire() { h.v.Expire(h) }

// runRenewable is a run as the renewal loop sees it (lease.Renewable).
type runRenewable guardRun

func (r *guardRun) renewable() *runRenewable { return (*runRenewable)(r) }

// Slot implements lease.Renewable.
func (r *runRenewable) Slot() *lease.Slot { return &r.renewal }

// BeginRenewal implements lease.Renewable.
func (r *runRenewable) BeginRenewal() (driver.ExtendRequest, time.Time, bool) {
	ttl, until, ok := r.v.TryBeginCall()
	return driver.ExtendRequest{Key: r.id.Key, Token: r.token, TTL: ttl}, until, ok
}

// SettleRenewal implements lease.Renewable.
func (r *runRenewable) SettleRenewal(start time.Time, req driver.ExtendRequest, res driver.ExtendResult) bool {
	return r.v.Settle((*guardRun)(r).holder(), start, req.TTL, res.Grant.TTL, classify(res.Err)) != nil
}

// Current implements lease.Renewable.
func (r *runRenewable) Current() (time.Duration, bool) { return r.v.Current() }
