package sqltest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// FoldedMeetsTheOtherModes: the folded begin against records of the
// two-step mode and of its own failures.
//   - A two-step execution in flight (its record committed, with a lease):
//     a folded call answers ErrInFlight with the lease left.
//   - A two-step executor stuck past its fixed lease: a waiting folded call
//     takes the record over in its transaction (TookOver, a greater fence)
//     and commits; the stuck executor's commit is refused (ErrLost): one
//     row.
//   - A folded execution running: a two-step call (a committed begin) is
//     not answered in flight but waits for the folded transaction, then
//     replays it (mixing modes on one key queues; docs/idempotency.md).
//   - A folded function that fails rolls back, leaving no row and no
//     record, so that the next call runs; a result is replayed across
//     modes.
func FoldedMeetsTheOtherModes(t *testing.T, b Backend) {
	table := b.Table(t)
	g := b.Guard(t, table, Sound)
	t.Run("TwoStepInFlight", func(t *testing.T) {
		started, release := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			_, _ = g.DoTx(ctx(t), "two", "fp", TwoStep, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
				close(started)
				<-release
				return []byte("two-step"), tx.Charge(ctx, "two", e.Fence)
			})
		})
		<-started
		_, err := g.DoTx(ctx(t), "two", "fp", Folded, func(context.Context, Tx, dlock.Execution) ([]byte, error) { return nil, errRan })
		close(release)
		wg.Wait()
		var inFlight *dlock.InFlightError
		if !errors.As(err, &inFlight) || inFlight.Remaining <= 0 {
			t.Fatalf("folded call during a two-step execution: %v; want ErrInFlight with the lease left", err)
		}
		if r, err := g.DoTx(ctx(t), "two", "fp", Folded, func(context.Context, Tx, dlock.Execution) ([]byte, error) { return nil, errRan }); err != nil || !r.Replayed || string(r.Value) != "two-step" {
			t.Fatalf("folded replay of a two-step result: %+v, %v", r, err)
		}
	})
	t.Run("FoldedTakesOverAStuckTwoStep", func(t *testing.T) {
		stuckG := b.Guard(t, table, Sound, dlock.WithTTL(300*time.Millisecond))
		waiter := b.Guard(t, table, Sound, dlock.WithWait(20*time.Second))
		started, release := make(chan struct{}), make(chan struct{})
		var errStuck error
		var stuckFence uint64
		var wg sync.WaitGroup
		wg.Go(func() {
			_, errStuck = stuckG.DoTx(ctx(t), "stuck", "fp", TwoStep, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
				stuckFence = e.Fence
				err := tx.Charge(ctx, "stuck", e.Fence)
				close(started)
				<-release
				return []byte("stuck"), err
			})
		})
		<-started
		var took bool
		var fence uint64
		r, err := waiter.DoTx(ctx(t), "stuck", "fp", Folded, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
			took, fence = e.TookOver, e.Fence
			return []byte("folded"), tx.Charge(ctx, "stuck", e.Fence)
		})
		close(release)
		wg.Wait()
		n := g.Charges(t, "stuck")
		if err != nil || string(r.Value) != "folded" || !took || fence <= stuckFence {
			t.Fatalf("the folded takeover: %+v, %v, took over %v, fence %d after %d", r, err, took, fence, stuckFence)
		}
		if !errors.Is(errStuck, dlock.ErrLost) || !errors.Is(errStuck, driver.ErrStaleFence) || n != 1 {
			t.Fatalf("the stuck executor: %v; %d business rows; want ErrLost and ErrStaleFence, one row", errStuck, n)
		}
	})
	t.Run("TwoStepWaitsForAFoldedTransaction", func(t *testing.T) {
		const hold = 300 * time.Millisecond
		started := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			_, _ = g.DoTx(ctx(t), "folded", "fp", Folded, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
				err := tx.Charge(ctx, "folded", e.Fence)
				close(started)
				<-time.After(hold)
				return []byte("folded"), err
			})
		})
		<-started
		r, err := g.DoTx(ctx(t), "folded", "fp", TwoStep, func(context.Context, Tx, dlock.Execution) ([]byte, error) { return nil, errRan })
		wg.Wait()
		if err != nil || !r.Replayed || string(r.Value) != "folded" {
			t.Fatalf("a two-step call during a folded execution: %+v, %v; want it to wait and replay", r, err)
		}
	})
	t.Run("FailureRollsBack", func(t *testing.T) {
		boom := errors.New("boom")
		if _, err := g.DoTx(ctx(t), "fail", "fp", Folded, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
			return nil, errors.Join(tx.Charge(ctx, "fail", e.Fence), boom)
		}); !errors.Is(err, boom) {
			t.Fatalf("a failing function: %v, want its error", err)
		}
		if n := g.Charges(t, "fail"); n != 0 {
			t.Fatalf("%d business rows after a failed folded call, want 0 (rolled back)", n)
		}
		if _, err := g.DoTx(ctx(t), "fail", "fp", Folded, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
			return []byte("folded"), tx.Charge(ctx, "fail", e.Fence)
		}); err != nil {
			t.Fatalf("the call after a failure: %v, want it run", err)
		}
		if r, err := g.DoTx(ctx(t), "fail", "fp", TwoStep, func(context.Context, Tx, dlock.Execution) ([]byte, error) { return nil, errRan }); err != nil || !r.Replayed || string(r.Value) != "folded" {
			t.Fatalf("two-step replay of a folded result: %+v, %v", r, err)
		}
		if n := g.Charges(t, "fail"); n != 1 {
			t.Fatalf("%d business rows, want 1", n)
		}
	})
}
