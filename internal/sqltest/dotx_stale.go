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

// StaleExecutorRollsBack, in the two-step mode (the only one where an
// execution can be taken over while its transaction is open): executor A
// (a fixed lease of 300 ms) charges in its transaction, then stalls; B
// takes the record over after A's lease, charges and commits. When A
// resumes, its fence check fails: DoTx returns ErrLost and ErrStaleFence,
// A's charge is rolled back, and B's result is the one replayed. Control:
// without the fence check A's transaction commits and the charge is
// doubled.
func StaleExecutorRollsBack(t *testing.T, b Backend) {
	for _, check := range []bool{true, false} {
		name := map[bool]string{true: "FenceChecked", false: "ControlWithoutFenceCheck"}[check]
		t.Run(name, func(t *testing.T) {
			table := b.Table(t)
			broken := Sound
			if !check {
				broken = NoFenceCheck
			}
			a := b.Guard(t, table, broken, dlock.WithTTL(300*time.Millisecond))
			bg := b.Guard(t, table, Sound, dlock.WithWait(20*time.Second))
			charged, resume := make(chan struct{}), make(chan struct{})
			var errA error
			var wg sync.WaitGroup
			wg.Go(func() {
				_, errA = a.DoTx(ctx(t), "order-2", "fp", TwoStep, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
					err := tx.Charge(ctx, "order-2", e.Fence)
					close(charged)
					<-resume // stalled past the lease
					return []byte("A"), err
				})
			})
			<-charged
			rb, errB := bg.DoTx(ctx(t), "order-2", "fp", TwoStep, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
				if !e.TookOver {
					return nil, errors.New("B ran without taking over")
				}
				return []byte("B"), tx.Charge(ctx, "order-2", e.Fence)
			})
			close(resume)
			wg.Wait()
			if errB != nil || string(rb.Value) != "B" {
				t.Fatalf("the takeover: %q, %v", rb.Value, errB)
			}
			n := bg.Charges(t, "order-2")
			t.Logf("A: %v; business rows %d", errA, n)
			if !check {
				if n != 2 {
					t.Fatalf("control: %d business rows, want 2 (the stale executor's commit doubles the charge)", n)
				}
				return
			}
			if !errors.Is(errA, dlock.ErrLost) || !errors.Is(errA, driver.ErrStaleFence) {
				t.Fatalf("the stale executor's DoTx = %v, want ErrLost and ErrStaleFence", errA)
			}
			if n != 1 {
				t.Fatalf("%d business rows, want 1 (the stale executor's charge rolled back)", n)
			}
			for _, mode := range []Mode{TwoStep, Folded} {
				if r, err := bg.DoTx(ctx(t), "order-2", "fp", mode, func(context.Context, Tx, dlock.Execution) ([]byte, error) {
					return nil, errors.New("ran again")
				}); err != nil || !r.Replayed || string(r.Value) != "B" {
					t.Fatalf("replay (%v) = %+v, %v; want B's result replayed", mode, r, err)
				}
			}
		})
	}
}
