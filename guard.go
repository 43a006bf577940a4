package dlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/lease"
)

// ErrInFlight means another execution of the same idempotency key is
// running: Guard.Do did not run the function (an HTTP layer answers 409).
var ErrInFlight = errors.New("dlock: request in flight")

// ErrMismatch means an idempotency key was reused for another request
// (another fingerprint): nothing was run or changed (an HTTP layer answers
// 422). It is driver.ErrMismatch.
var ErrMismatch = driver.ErrMismatch

// DefaultRetention is how long a Guard keeps a completed result when
// NewGuard is given 0: a day, as Stripe keeps its keys at least.
const DefaultRetention = 24 * time.Hour

// InFlightError is what Guard.Do returns when another execution of the key
// is running and Do did not wait for it (or the wait ended first). It
// matches ErrInFlight, and Cause when set.
type InFlightError struct {
	// Remaining is the running execution's lease left as the store saw
	// it, or negative if unknown.
	Remaining time.Duration
	// Cause is why a wait ended (the context's error, or nil when Do did
	// not wait or its WithWait bound elapsed).
	Cause error
}

// Error says the request is in flight and for how long its lease runs.
func (e *InFlightError) Error() string {
	msg := ErrInFlight.Error()
	if e.Remaining >= 0 {
		msg += fmt.Sprintf(" (its lease ends in %v)", e.Remaining.Round(time.Millisecond))
	}
	if e.Cause != nil {
		msg += ": " + trimSentinels(e.Cause.Error())
	}
	return msg
}

// Is reports whether target is ErrInFlight.
func (e *InFlightError) Is(target error) bool { return target == ErrInFlight }

// Unwrap returns Cause.
func (e *InFlightError) Unwrap() error { return e.Cause }

// Guard runs each request of an idempotency key once and answers every
// later request of that key with the stored result (driver.Idempotency):
// the idempotency guard of the IETF Idempotency-Key draft, with fenced
// takeover of an execution whose process died. It is safe for concurrent
// use; create one per store and share it. It does not own the store.
// Stores that implement driver.Idempotency today: memstore, redisstore,
// pgstore and mysqlstore (whose DoTx, in pgguard and myguard, keeps the
// record in the transaction of the business writes: see DoFolded, DoTx).
type Guard struct {
	store     driver.Idempotency
	cfg       config
	retention time.Duration
	scope     string
	runs      *guardRuns // shared by the Guards of every Scope
}

// guardRuns are the executions under way, for their renewal.
type guardRuns struct {
	renewer *lease.Renewer[Timer]
	byToken sync.Map // token -> *guardRun
}

// NewGuard returns a Guard on store that keeps completed results for
// retention (0: DefaultRetention). Options: WithAutoRenew(lease) is the
// executing call's lease, renewed while its function runs (default:
// DefaultLease, renewed); WithTTL(lease) a fixed lease that the function
// must finish within, or be taken over; WithWait(d) makes a call that meets
// a running execution wait up to d for its result (default 0: ErrInFlight
// at once); WithBackoff paces that wait; WithOnRetry and WithClock apply
// as to a Client; WithObserver is told each call's result
// (EventIdempotencyResult). WithRead does not apply. It returns an error matching
// ErrInvalid, before any I/O, for a nil store, a negative retention or an
// option out of range.
func NewGuard(store driver.Idempotency, retention time.Duration, opts ...Option) (*Guard, error) {
	if store == nil {
		return nil, invalidf("nil store")
	}
	switch {
	case retention == 0:
		retention = DefaultRetention
	case retention < 0:
		return nil, invalidf("negative retention %v", retention)
	}
	model := store.Model()
	cfg := defaultConfig()
	cfg.ttl, cfg.wait = defaultTTL(model), 0
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.read != nil {
		return nil, invalidf("WithRead does not apply to a Guard")
	}
	if err := fitModel(model, &cfg.ttl); err != nil {
		return nil, err
	}
	g := &Guard{store: store, cfg: cfg, retention: retention, runs: &guardRuns{}}
	g.runs.renewer = lease.NewRenewer[Timer](cfg.clock, recordExtender{store, g.runs})
	return g, nil
}

// Scope returns a Guard that keeps its records in scope (a client, a
// tenant): the same key in two scopes names two requests. It shares g's
// store, options and renewal; g's own scope is "". It does no I/O; a scope
// the store cannot take makes Do fail with ErrInvalid.
func (g *Guard) Scope(scope string) *Guard {
	s := *g
	s.scope = scope
	return &s
}

// Retention returns how long completed results are kept.
func (g *Guard) Retention() time.Duration { return g.retention }

// Execution is what Do tells the function it runs.
type Execution struct {
	// Scope and Key name the request.
	Scope, Key string
	// Fence is this execution's fencing token: greater than that of any
	// execution of the key it took over.
	Fence uint64
	// TookOver reports that an earlier execution of the key ran out of
	// lease without completing (its process died, or stalled): some of
	// its work, downstream calls included, may have been done.
	TookOver bool
}

// DownstreamKey returns the idempotency key to send with the downstream
// call named call (a payment provider's charge, say): derived from the
// scope, the key and call, never from the fence, so that it is the same in
// every execution of the request, and a takeover's resent charge is one
// charge. It is 32 hex digits.
func (e Execution) DownstreamKey(call string) string {
	h := sha256.New()
	for _, s := range []string{"dlock idempotency", e.Scope, e.Key, call} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Result is what Do answers.
type Result struct {
	// Value is the function's result.
	Value []byte
	// Replayed reports that Value is the stored result of an earlier
	// execution: the function did not run in this call.
	Replayed bool
	// Fence is the fence of the execution that produced Value.
	Fence uint64
}

// Do runs fn once for key in g's scope and returns its result; later calls
// of key get that result back, Replayed, for the retention; another
// fingerprint gets ErrMismatch. While fn runs (its lease renewed, its ctx
// cancelled on loss), other calls get an *InFlightError or, WithWait, wait
// and take over after the lease if fn's process died. A taken-over
// execution's result is refused (ErrLost and ErrStaleFence). If fn fails,
// panics or returns over driver.MaxResultLen, nothing is stored; an
// unanswered completion returns the result with ErrUnavailable. Invalid
// arguments return ErrInvalid before any I/O. Pass Execution.DownstreamKey
// to calls that must not run twice; docs/idempotency.md has the rest.
func (g *Guard) Do(ctx context.Context, key, fingerprint string, fn func(context.Context, Execution) ([]byte, error)) (Result, error) {
	return g.do(ctx, key, fingerprint, runMode{}, fn)
}

// runMode is how do begins and ends a record: by the store's calls (Do),
// completed by fn (DoTx: inTx), or begun by a BeginFunc in fn's
// transaction (DoFolded: folded, inTx).
type runMode struct {
	inTx   bool
	folded BeginFunc
}

// do is Do, DoTx or DoFolded, by mode.
func (g *Guard) do(ctx context.Context, key, fingerprint string, mode runMode, fn func(context.Context, Execution) ([]byte, error)) (Result, error) {
	if ctx == nil || fn == nil {
		return Result{}, invalidf("nil context or function")
	}
	id := driver.RecordID{Scope: g.scope, Key: key}
	if err := driver.ValidateRecord(id, "t", fingerprint, g.cfg.ttl, g.retention); err != nil {
		return Result{}, err
	}
	token := newToken()
	beginRecord := g.store.BeginRecord
	if mode.folded != nil {
		beginRecord = mode.folded
	}
	b, start, err := g.begin(ctx, beginRecord, id, token, fingerprint)
	switch {
	case err != nil:
		g.result(ctx, key, guardOutcome(err), 0, 0, err)
		return Result{}, err
	case b.State == driver.RecordCompleted:
		g.result(ctx, key, OutcomeReplayed, b.Fence, 0, nil)
		return Result{Value: b.Result, Replayed: true, Fence: b.Fence}, nil
	}
	if mode.folded != nil {
		return g.executeFolded(ctx, id, b, fn)
	}
	return g.execute(ctx, id, token, b, start, mode.inTx, fn)
}

// DoTx is Do for a function that completes the record itself, in the
// database transaction of its own writes, so that the writes and the
// record commit together or not at all: the two-step SQL mode of the
// guard (the record begun and committed first; DoFolded is the default),
// which pgguard.DoTx and myguard.DoTx build on with their TwoStep option
// (use those). fn must, within
// its transaction and before committing, complete the record of its
// Execution's Fence (pgstore.Store.CompleteRecordTx,
// mysqlstore.Store.CompleteRecordTx), and return the result it stored
// only once committed. If fn returns an error, nothing more is stored:
// the record is abandoned (refused, harmlessly, if fn's commit did land)
// and Do returns the error, with ErrLost added when it matches
// ErrStaleFence (the execution was taken over; fn must have rolled back).
// If fn returns nil without completing the record, the record stays in
// flight until its lease passes, then a retry runs fn again. The record's
// lease is renewed while fn runs, as for Do; fn's ctx is cancelled if it
// is lost. Replays, in-flight calls, waits, mismatches and invalid
// arguments are as for Do.
func (g *Guard) DoTx(ctx context.Context, key, fingerprint string, fn func(context.Context, Execution) ([]byte, error)) (Result, error) {
	return g.do(ctx, key, fingerprint, runMode{inTx: true}, fn)
}

// Store returns the store g keeps its records in.
func (g *Guard) Store() driver.Idempotency { return g.store }

// maxBeginResends is how many times begin resends a BeginRecord whose
// outcome is unknown.
const maxBeginResends = 2

// begin calls BeginRecord until the record is not in flight, the wait
// ends, or an error; it returns the answer and when its call started. A
// call whose outcome is unknown (no answer: the record may be this call's)
// is resent with the same token, up to maxBeginResends times, which the
// store answers as the same execution, rather than left to block the key
// for a lease.
func (g *Guard) begin(ctx context.Context, beginRecord BeginFunc, id driver.RecordID, token, fp string) (driver.RecordBegin, time.Time, error) {
	wctx := ctx
	if g.cfg.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, g.cfg.wait, errWaitElapsed)
		defer cancel()
	}
	resends := 0
	for failures := 1; ; failures++ {
		start := g.cfg.clock.Now()
		b, err := beginRecord(wctx, id, token, fp, g.cfg.ttl, g.retention)
		switch {
		case err == nil && b.State != driver.RecordInFlight:
			return b, start, nil
		case err == nil && g.cfg.wait == 0:
			return b, start, &InFlightError{Remaining: b.Remaining}
		case err != nil && wctx.Err() != nil && failures > 1:
			return b, start, g.inFlight(ctx, -1)
		case err != nil && (resends == maxBeginResends || wctx.Err() != nil || !unknownOutcome(err)):
			return b, start, beginError(id, err)
		case err != nil:
			resends++
			failures-- // a resend is no failure of the wait
			if !sleep(wctx, g.cfg.clock, g.cfg.backoff(resends), nil) {
				return b, start, beginError(id, err)
			}
			continue
		}
		if g.cfg.onRetry != nil {
			g.cfg.onRetry(failures, &InFlightError{Remaining: b.Remaining})
		}
		pause := g.cfg.backoff(failures)
		if b.Remaining > 0 {
			pause = min(pause, b.Remaining)
		}
		if !sleep(wctx, g.cfg.clock, pause, nil) {
			return b, start, g.inFlight(ctx, b.Remaining)
		}
	}
}

// unknownOutcome reports whether a BeginRecord error leaves the outcome
// unknown: no answer of the contract's.
func unknownOutcome(err error) bool {
	for _, known := range []error{ErrMismatch, ErrInvalid, ErrRefused, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, known) {
			return false
		}
	}
	return true
}

// beginError is the error Do returns for a failed BeginRecord: a mismatch
// as it is, anything unexpected as ErrUnavailable.
func beginError(id driver.RecordID, err error) error {
	if !errors.Is(err, ErrMismatch) {
		err = classify(err)
	}
	return tidy(fmt.Errorf("dlock: idempotency key %q: %w", id.Key, err))
}

// inFlight is the error of a wait that ended: ctx's cause, or none when the
// wait bound elapsed.
func (g *Guard) inFlight(ctx context.Context, remaining time.Duration) error {
	e := &InFlightError{Remaining: remaining}
	if ctx.Err() != nil {
		e.Cause = context.Cause(ctx)
	}
	return e
}
