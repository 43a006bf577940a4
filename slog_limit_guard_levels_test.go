package dlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"example.com/dlock"
)

// SlogObserver logs a limiter's decisions and a guard's results at the
// documented levels: denials and replays at Debug, a takeover at Info, a
// stale executor and an unreachable store at Warn; with the limiter's
// requests and retry_after.
func TestSlogObserverLimitAndGuardLevels(t *testing.T) {
	cases := []struct {
		e     dlock.Event
		level string
	}{
		{dlock.Event{Type: dlock.EventLimitDecision, Kind: dlock.KindLimit, Outcome: dlock.OutcomeAllowed}, "DEBUG"},
		{dlock.Event{Type: dlock.EventLimitDecision, Kind: dlock.KindLimit, Outcome: dlock.OutcomeDenied, RetryAfter: time.Second}, "DEBUG"},
		{dlock.Event{Type: dlock.EventLimitDecision, Kind: dlock.KindLimit, Outcome: dlock.OutcomeUnavailable, Err: dlock.ErrUnavailable}, "WARN"},
		{dlock.Event{Type: dlock.EventLimitDecision, Kind: dlock.KindLimit, Outcome: dlock.OutcomeInvalid, Err: dlock.ErrInvalid}, "WARN"},
		{dlock.Event{Type: dlock.EventWaitEnd, Kind: dlock.KindLimit, Outcome: dlock.OutcomeAllowed}, "DEBUG"},
		{dlock.Event{Type: dlock.EventIdempotencyResult, Kind: dlock.KindIdempotency, Outcome: dlock.OutcomeExecuted}, "DEBUG"},
		{dlock.Event{Type: dlock.EventIdempotencyResult, Kind: dlock.KindIdempotency, Outcome: dlock.OutcomeReplayed}, "DEBUG"},
		{dlock.Event{Type: dlock.EventIdempotencyResult, Kind: dlock.KindIdempotency, Outcome: dlock.OutcomeInFlight}, "DEBUG"},
		{dlock.Event{Type: dlock.EventIdempotencyResult, Kind: dlock.KindIdempotency, Outcome: dlock.OutcomeMismatch}, "INFO"},
		{dlock.Event{Type: dlock.EventIdempotencyResult, Kind: dlock.KindIdempotency, Outcome: dlock.OutcomeTookOver}, "INFO"},
		{dlock.Event{Type: dlock.EventIdempotencyResult, Kind: dlock.KindIdempotency, Outcome: dlock.OutcomeFailed, Err: errors.New("fn")}, "INFO"},
		{dlock.Event{Type: dlock.EventIdempotencyResult, Kind: dlock.KindIdempotency, Outcome: dlock.OutcomeStale, Err: dlock.ErrLost}, "WARN"},
	}
	for _, c := range cases {
		var out bytes.Buffer
		obs := dlock.SlogObserver(slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
		c.e.Key, c.e.Count = "k", 2
		obs.Event(context.Background(), c.e)
		line := logLines(t, out.Bytes())[0]
		if line["level"] != c.level || line["outcome"] != string(c.e.Outcome) {
			t.Errorf("%s %s logged %v, want level %s", c.e.Type, c.e.Outcome, line, c.level)
		}
		if c.e.Kind == dlock.KindLimit && line["requests"] != 2.0 {
			t.Errorf("%s %s logged %v, want requests 2", c.e.Type, c.e.Outcome, line)
		}
		if _, ok := line["retry_after"]; ok != (c.e.RetryAfter != 0) {
			t.Errorf("%s %s logged %v: retry_after wrong", c.e.Type, c.e.Outcome, line)
		}
	}
}
