package dlock

import (
	"context"
	"errors"
	"time"
)

// The kinds of the rate limiter's and the idempotency guard's events.
const (
	KindLimit       Kind = "limit"       // a Limiter's decision or wait
	KindIdempotency Kind = "idempotency" // a Guard's call
)

// The events of the rate limiter and the idempotency guard.
const (
	// EventLimitDecision: a Limiter answered one request of Count (AllowN,
	// and each try of WaitN): Outcome allowed or denied (RetryAfter set),
	// or why it failed (Err), after Lag (the store's round trip). A
	// request refused before any I/O (bad key, n < 1) is reported too,
	// invalid, with Lag 0.
	EventLimitDecision EventType = "limit.decision"
	// EventIdempotencyResult: a Guard's Do (or DoTx) ended with Outcome,
	// Fence the execution's (replayed, executed, took_over, stale) and Held
	// the function's run time where it ran. A call refused before any I/O
	// emits none.
	EventIdempotencyResult EventType = "idempotency.result"
)

// The outcomes of the rate limiter's and the idempotency guard's events.
const (
	OutcomeAllowed Outcome = "allowed" // limit: the requests were admitted (a wait's too)
	OutcomeDenied  Outcome = "denied"  // limit: the budget had no room; RetryAfter says when

	OutcomeExecuted Outcome = "executed"  // idempotency: fn ran and its result was stored
	OutcomeTookOver Outcome = "took_over" // idempotency: executed, after a dead execution's lease passed
	OutcomeReplayed Outcome = "replayed"  // idempotency: the stored result was returned
	OutcomeInFlight Outcome = "in_flight" // idempotency: another execution runs (ErrInFlight)
	OutcomeMismatch Outcome = "mismatch"  // idempotency: the key was reused for another request
	OutcomeStale    Outcome = "stale"     // idempotency: fn ran but was taken over; its result not stored
	OutcomeFailed   Outcome = "failed"    // idempotency: fn failed, panicked or returned a result too large
)

// decided tells l's Observer of a decision on n requests of key sent at
// start that ended with r and err.
func (l *Limiter) decided(ctx context.Context, key string, n int, start time.Time, r RateResult, err error) {
	e := Event{Type: EventLimitDecision, Kind: KindLimit, Key: key, Count: n, Err: err}
	if !start.IsZero() {
		e.Lag = time.Since(start)
	}
	switch {
	case err != nil:
		e.Outcome = waitOutcome(err)
	case r.Allowed > 0:
		e.Outcome = OutcomeAllowed
	default:
		e.Outcome, e.RetryAfter = OutcomeDenied, r.RetryAfter
	}
	l.obs.Event(ctx, e)
}

// waited tells l's Observer that a WaitN of n requests of key begun at
// start ended with err.
func (l *Limiter) waited(ctx context.Context, key string, n int, start time.Time, err error) {
	o := OutcomeAllowed
	if err != nil {
		o = waitOutcome(err)
	}
	l.obs.Event(ctx, Event{Type: EventWaitEnd, Kind: KindLimit, Key: key, Count: n, Outcome: o,
		Waited: time.Since(start), Err: err})
}

// guardOutcome classifies the error of a BeginRecord that did not let Do
// run fn.
func guardOutcome(err error) Outcome {
	switch {
	case errors.Is(err, ErrInFlight):
		return OutcomeInFlight
	case errors.Is(err, ErrMismatch):
		return OutcomeMismatch
	}
	return waitOutcome(err)
}

// result tells g's Observer, if any, how a Do of id ended.
func (g *Guard) result(ctx context.Context, key string, o Outcome, fence uint64, held time.Duration, err error) {
	if g.cfg.obs == nil {
		return
	}
	g.cfg.obs.Event(ctx, Event{Type: EventIdempotencyResult, Kind: KindIdempotency, Key: key,
		Fence: fence, Outcome: o, Held: held, Err: err})
}
