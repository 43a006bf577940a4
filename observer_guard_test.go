package dlock_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// tokenKeeper is a driver.Idempotency that keeps every token it is sent.
type tokenKeeper struct {
	driver.Idempotency
	mu     sync.Mutex
	tokens []string
}

func (k *tokenKeeper) BeginRecord(ctx context.Context, id driver.RecordID, tok, fp string, lease, keep time.Duration) (driver.RecordBegin, error) {
	k.mu.Lock()
	k.tokens = append(k.tokens, tok)
	k.mu.Unlock()
	return k.Idempotency.BeginRecord(ctx, id, tok, fp, lease, keep)
}

func idemEvent(key string, o dlock.Outcome, fence uint64, held time.Duration) dlock.Event {
	return dlock.Event{Type: dlock.EventIdempotencyResult, Kind: dlock.KindIdempotency, Key: key,
		Outcome: o, Fence: fence, Held: held}
}

// sleeper is a function for Do that runs for d and answers answer.
func sleeper(d time.Duration, answer string) func(context.Context, dlock.Execution) ([]byte, error) {
	return func(context.Context, dlock.Execution) ([]byte, error) {
		time.Sleep(d)
		return []byte(answer), nil
	}
}

// A Guard reports each Do's outcome, one event each, with the fence and
// fn's run time where fn ran: executed, replayed, mismatch, in flight, and
// a takeover of an execution whose fixed lease passed, which then reports
// itself stale. No event and no log line (SlogObserver at Debug) holds an
// owner token.
func TestGuardEventsPerResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		var logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		var mu sync.Mutex
		var events strings.Builder // every event, printed
		obs := dlock.ObserverFunc(func(ctx context.Context, e dlock.Event) {
			rec.Event(ctx, e)
			mu.Lock()
			fmt.Fprintf(&events, "%+v\n", e)
			mu.Unlock()
			dlock.SlogObserver(logger).Event(ctx, e)
		})
		store := &tokenKeeper{Idempotency: memstore.New(nil)}
		g := newGuard(t, store, dlock.WithObserver(obs))
		ctx := context.Background()

		first, err := g.Do(ctx, "a", "fp", sleeper(3*time.Second, "one"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = g.Do(ctx, "a", "fp", sleeper(0, "two"))
		_, _ = g.Do(ctx, "a", "other", sleeper(0, "three"))
		expect(t, rec.take(),
			want{e: idemEvent("a", dlock.OutcomeExecuted, first.Fence, 3*time.Second)},
			want{e: idemEvent("a", dlock.OutcomeReplayed, first.Fence, 0)},
			want{e: idemEvent("a", dlock.OutcomeMismatch, 0, 0), err: dlock.ErrMismatch})

		var wg sync.WaitGroup
		var running dlock.Result
		wg.Go(func() { running, _ = g.Do(ctx, "b", "fp", sleeper(time.Second, "b")) })
		synctest.Wait()
		_, _ = g.Do(ctx, "b", "fp", sleeper(0, "b2"))
		wg.Wait()
		expect(t, rec.take(),
			want{e: idemEvent("b", dlock.OutcomeInFlight, 0, 0), err: dlock.ErrInFlight},
			want{e: idemEvent("b", dlock.OutcomeExecuted, running.Fence, time.Second)})

		fixed := newGuard(t, store, dlock.WithTTL(time.Second), dlock.WithObserver(obs))
		var stale dlock.Result
		wg.Go(func() { stale, _ = fixed.Do(ctx, "c", "fp", sleeper(2*time.Second, "late")) })
		time.Sleep(1500 * time.Millisecond) // its lease has passed, unrenewed
		taken, err := fixed.Do(ctx, "c", "fp", sleeper(0, "taken over"))
		if err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if stale.Fence == 0 || taken.Fence <= stale.Fence {
			t.Fatalf("fences: stale %d, taken over %d", stale.Fence, taken.Fence)
		}
		expect(t, rec.take(),
			want{e: idemEvent("c", dlock.OutcomeTookOver, taken.Fence, 0)},
			want{e: idemEvent("c", dlock.OutcomeStale, stale.Fence, 2*time.Second), err: dlock.ErrLost})

		store.mu.Lock()
		defer store.mu.Unlock()
		if len(store.tokens) < 7 || logs.Len() == 0 {
			t.Fatalf("control: %d tokens kept, %d bytes logged; want every call's token and a log", len(store.tokens), logs.Len())
		}
		for _, tok := range store.tokens {
			if tok == "" || strings.Contains(logs.String(), tok) || strings.Contains(events.String(), tok) {
				t.Fatalf("token %q empty, logged or in an event:\n%s\n%s", tok, logs.String(), events.String())
			}
		}
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "outcome=stale") {
			t.Fatalf("the stale executor is not logged at Warn:\n%s", logs.String())
		}
	})
}
