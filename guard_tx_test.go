package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// TestGuardDoTxLeavesTheCompletionToFn: DoTx never completes the record
// itself (fn's transaction does): after fn returns a result, the record is
// still in flight, so the next call is ErrInFlight. Control: Do, the same
// call otherwise, completes it and the next call replays. A stale error of
// fn comes back as ErrLost and the record is abandoned (the next call
// runs); a completed record is replayed by DoTx without running fn.
func TestGuardDoTxLeavesTheCompletionToFn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGuard(t, memstore.New(nil))
		var runs atomic.Int32
		if r, err := g.DoTx(t.Context(), "k", "fp", counter(&runs, "tx")); err != nil || string(r.Value) != "tx" || r.Replayed {
			t.Fatalf("DoTx = %+v, %v", r, err)
		}
		if _, err := g.Do(t.Context(), "k", "fp", counter(&runs, "again")); !errors.Is(err, dlock.ErrInFlight) {
			t.Fatalf("after DoTx the next call = %v, want ErrInFlight (DoTx left the record to fn)", err)
		}
		if _, err := g.Do(t.Context(), "c", "fp", counter(&runs, "do")); err != nil {
			t.Fatal(err)
		}
		if r, err := g.DoTx(t.Context(), "c", "fp", counter(&runs, "not run")); err != nil || !r.Replayed || string(r.Value) != "do" {
			t.Fatalf("control: after Do, DoTx = %+v, %v; want the replay", r, err)
		}

		stale := func(context.Context, dlock.Execution) ([]byte, error) {
			return nil, fmt.Errorf("the commit's fence check: %w", driver.StaleExecutor(true))
		}
		if _, err := g.DoTx(t.Context(), "s", "fp", stale); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, driver.ErrStaleFence) {
			t.Fatalf("DoTx of a stale fn = %v, want ErrLost and ErrStaleFence", err)
		}
		before := runs.Load()
		if _, err := g.DoTx(t.Context(), "s", "fp", counter(&runs, "s")); err != nil || runs.Load() != before+1 {
			t.Fatalf("after a failed DoTx the next call: %v, ran %d times; want it run (the record abandoned)", err, runs.Load()-before)
		}
		if g.Store() == nil {
			t.Fatal("Store() = nil")
		}
	})
}
