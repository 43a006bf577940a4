package dlock

import (
	"context"
	"log/slog"
	"time"
)

// SlogObserver returns an Observer that logs every event to logger
// (slog.Default() if nil), with the attributes kind, key and, where they
// apply, fence, holds (or permits), outcome, waited, held, lag, background
// and err; never the owner token. Levels:
//
//   - Warn: a loss (EventLost), a failed renewal, and a wait that ended
//     refused, unavailable or invalid: something an operator should see.
//   - Info: a wait that timed out, a release retried in the background.
//   - Debug: the rest (waits starting, acquisitions, tries that met
//     another holder, cancelled waits, renewals, releases, handoffs).
//
// A Limiter's decision (EventLimitDecision) and a Guard's result
// (EventIdempotencyResult) are logged at Debug when allowed, denied,
// cancelled, executed, replayed or in flight; at Info when timed out, a
// mismatch, a takeover or a failed function; at Warn otherwise: a stale
// executor (its result not stored), a store that was unavailable or
// refused, an invalid request. The attributes add requests (a Limiter's
// n) and retry_after (a denial).
//
// Levels the logger's handler does not enable cost one Enabled call.
func SlogObserver(logger *slog.Logger) Observer {
	if logger == nil {
		logger = slog.Default()
	}
	return slogObserver{logger}
}

type slogObserver struct{ l *slog.Logger }

// Event implements Observer.
func (o slogObserver) Event(ctx context.Context, e Event) {
	level, msg := slogLevel(e)
	if !o.l.Enabled(ctx, level) {
		return
	}
	var buf [12]slog.Attr
	a := append(buf[:0], slog.String("kind", string(e.Kind)), slog.String("key", e.Key))
	if e.Fence != 0 {
		a = append(a, slog.Uint64("fence", e.Fence))
	}
	if e.Count != 0 {
		name := "holds"
		switch e.Kind {
		case KindPermit:
			name = "permits"
		case KindLimit:
			name = "requests"
		}
		a = append(a, slog.Int(name, e.Count))
	}
	if e.Outcome != "" {
		a = append(a, slog.String("outcome", string(e.Outcome)))
	}
	switch e.Type {
	case EventWaitEnd:
		a = append(a, slog.Duration("waited", e.Waited))
	case EventRenewed, EventRenewFailed:
		a = append(a, slog.Duration("lag", e.Lag))
	case EventLost, EventReleased, EventHandedOff:
		a = append(a, slog.Duration("held", e.Held))
	case EventWaitStart:
	default: // another primitive's event: whatever it set
		for _, d := range [...]struct {
			name string
			d    time.Duration
		}{{"waited", e.Waited}, {"held", e.Held}, {"lag", e.Lag}} {
			if d.d != 0 {
				a = append(a, slog.Duration(d.name, d.d))
			}
		}
	}
	if e.RetryAfter != 0 {
		a = append(a, slog.Duration("retry_after", e.RetryAfter))
	}
	if e.Background {
		a = append(a, slog.Bool("background", true))
	}
	if e.Err != nil {
		a = append(a, slog.String("err", e.Err.Error()))
	}
	o.l.LogAttrs(ctx, level, msg, a...)
}

// slogLevel returns the level and message SlogObserver logs e with.
func slogLevel(e Event) (slog.Level, string) {
	switch e.Type {
	case EventWaitStart:
		return slog.LevelDebug, "dlock: wait started"
	case EventWaitEnd:
		switch e.Outcome {
		case OutcomeAcquired:
			return slog.LevelDebug, "dlock: acquired"
		case OutcomeAllowed:
			return slog.LevelDebug, "dlock: allowed"
		case OutcomeContended, OutcomeCancelled:
			return slog.LevelDebug, "dlock: not acquired"
		case OutcomeTimedOut:
			return slog.LevelInfo, "dlock: not acquired"
		}
		return slog.LevelWarn, "dlock: not acquired"
	case EventRenewed:
		return slog.LevelDebug, "dlock: renewed"
	case EventRenewFailed:
		return slog.LevelWarn, "dlock: renewal failed"
	case EventLost:
		return slog.LevelWarn, "dlock: lost"
	case EventReleased:
		if e.Background {
			return slog.LevelInfo, "dlock: released in the background"
		}
		return slog.LevelDebug, "dlock: released"
	case EventHandedOff:
		return slog.LevelDebug, "dlock: handed off"
	case EventLimitDecision, EventIdempotencyResult:
		return outcomeLevel(e.Outcome), "dlock: " + string(e.Type)
	}
	return slog.LevelInfo, "dlock: " + string(e.Type) // another primitive's event
}

// outcomeLevel is the level of a limiter's decision or a guard's result.
func outcomeLevel(o Outcome) slog.Level {
	switch o {
	case OutcomeAllowed, OutcomeDenied, OutcomeCancelled,
		OutcomeExecuted, OutcomeReplayed, OutcomeInFlight:
		return slog.LevelDebug
	case OutcomeTimedOut, OutcomeMismatch, OutcomeTookOver, OutcomeFailed:
		return slog.LevelInfo
	}
	return slog.LevelWarn // stale, unavailable, refused, invalid
}
