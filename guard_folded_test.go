package dlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// recordCalls counts a store's renewals and abandons of records.
type recordCalls struct {
	driver.Idempotency
	extends, abandons atomic.Int32
}

func (r *recordCalls) ExtendRecord(ctx context.Context, id driver.RecordID, tok string, fence uint64, lease time.Duration) error {
	r.extends.Add(1)
	return r.Idempotency.ExtendRecord(ctx, id, tok, fence, lease)
}

func (r *recordCalls) AbandonRecord(ctx context.Context, id driver.RecordID, tok string, fence uint64) error {
	r.abandons.Add(1)
	return r.Idempotency.AbandonRecord(ctx, id, tok, fence)
}

// TestGuardDoFoldedLeavesTheRecordToTheTransaction: DoFolded neither
// renews nor abandons the record (the transaction that begin opened holds
// it): a function that outlives a third of its lease, then one that fails,
// make no store call. Control: DoTx, the same calls otherwise, renews and
// abandons. The begin function decides: its in-flight answer is
// ErrInFlight and its completed one a replay, fn not run; a nil begin is
// ErrInvalid.
func TestGuardDoFoldedLeavesTheRecordToTheTransaction(t *testing.T) {
	for _, folded := range []bool{true, false} {
		name := map[bool]string{true: "Folded", false: "ControlDoTx"}[folded]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &recordCalls{Idempotency: memstore.New(nil)}
				g := newGuard(t, store, dlock.WithAutoRenew(3*time.Second))
				do := func(key string, fn func(context.Context, dlock.Execution) ([]byte, error)) (dlock.Result, error) {
					if folded {
						return g.DoFolded(t.Context(), key, "fp", store.BeginRecord, fn)
					}
					return g.DoTx(t.Context(), key, "fp", fn)
				}
				if _, err := do("slow", func(context.Context, dlock.Execution) ([]byte, error) {
					time.Sleep(5 * time.Second)
					return []byte("ok"), nil
				}); err != nil {
					t.Fatal(err)
				}
				boom := errors.New("boom")
				if _, err := do("fails", func(context.Context, dlock.Execution) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
					t.Fatalf("a failing fn: %v, want its error", err)
				}
				ext, ab := store.extends.Load(), store.abandons.Load()
				t.Logf("%s: %d renewals, %d abandons", name, ext, ab)
				switch {
				case folded && (ext != 0 || ab != 0):
					t.Fatalf("DoFolded renewed %d times and abandoned %d times, want neither (the transaction holds the record)", ext, ab)
				case !folded && (ext == 0 || ab != 1):
					t.Fatalf("control: DoTx renewed %d times and abandoned %d times, want renewals and one abandon", ext, ab)
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		g := newGuard(t, store)
		var runs atomic.Int32
		if _, err := g.DoFolded(t.Context(), "k", "fp", nil, counter(&runs, "x")); !errors.Is(err, dlock.ErrInvalid) {
			t.Fatalf("nil begin: %v, want ErrInvalid", err)
		}
		if _, err := g.Do(t.Context(), "done", "fp", counter(&runs, "done")); err != nil {
			t.Fatal(err)
		}
		inFlight := func(context.Context, driver.RecordID, string, string, time.Duration, time.Duration) (driver.RecordBegin, error) {
			return driver.RecordBegin{State: driver.RecordInFlight, Remaining: -1}, nil
		}
		if _, err := g.DoFolded(t.Context(), "k", "fp", inFlight, counter(&runs, "x")); !errors.Is(err, dlock.ErrInFlight) {
			t.Fatalf("begin in flight: %v, want ErrInFlight", err)
		}
		if r, err := g.DoFolded(t.Context(), "done", "fp", store.BeginRecord, counter(&runs, "x")); err != nil || !r.Replayed || string(r.Value) != "done" {
			t.Fatalf("begin completed: %+v, %v; want the replay", r, err)
		}
		if runs.Load() != 1 {
			t.Fatalf("fn ran %d times, want once (the Do)", runs.Load())
		}
	})
}

// DoFolded reports each call's outcome as Do does, one event each:
// executed (with the fence and fn's run time), in flight (the begin
// function's answer), failed, replayed.
func TestGuardDoFoldedEventsPerResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		store := memstore.New(nil)
		g := newGuard(t, store, dlock.WithObserver(rec))
		if _, err := g.Do(t.Context(), "done", "fp", sleeper(0, "d")); err != nil {
			t.Fatal(err)
		}
		rec.take()
		r, err := g.DoFolded(t.Context(), "k", "fp", store.BeginRecord, sleeper(time.Second, "v"))
		if err != nil {
			t.Fatal(err)
		}
		inFlight := func(context.Context, driver.RecordID, string, string, time.Duration, time.Duration) (driver.RecordBegin, error) {
			return driver.RecordBegin{State: driver.RecordInFlight, Remaining: -1}, nil
		}
		_, _ = g.DoFolded(t.Context(), "k", "fp", inFlight, sleeper(0, "not run"))
		_, _ = g.DoFolded(t.Context(), "f", "fp", store.BeginRecord, func(context.Context, dlock.Execution) ([]byte, error) {
			return nil, errors.New("boom")
		})
		_, _ = g.DoFolded(t.Context(), "done", "fp", store.BeginRecord, sleeper(0, "not run"))
		ev := rec.take()
		want := []dlock.Outcome{dlock.OutcomeExecuted, dlock.OutcomeInFlight, dlock.OutcomeFailed, dlock.OutcomeReplayed}
		if len(ev) != len(want) {
			t.Fatalf("%d events, want %d: %+v", len(ev), len(want), ev)
		}
		for i, o := range want {
			if ev[i].Outcome != o || ev[i].Type != dlock.EventIdempotencyResult {
				t.Fatalf("event %d: %+v, want outcome %v", i, ev[i], o)
			}
		}
		if ev[0].Fence != r.Fence || ev[0].Held != time.Second {
			t.Fatalf("the execution's event: fence %d, held %v; want %d, 1s", ev[0].Fence, ev[0].Held, r.Fence)
		}
	})
}
