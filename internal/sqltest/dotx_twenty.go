package sqltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
)

// TwentyCallsChargeOnce: 20 identical calls at once, on two instances,
// each charging inside DoTx (folded, then two-step): exactly one
// execution, one business row, and every caller gets its result (the
// others wait for it, WithWait). Control: the same 20 calls charging in
// plain transactions make more than one row (the race is real).
func TwentyCallsChargeOnce(t *testing.T, b Backend) {
	for _, c := range []struct {
		name    string
		guarded bool
		mode    Mode
	}{{"Folded", true, Folded}, {"TwoStep", true, TwoStep}, {"ControlUnguarded", false, Folded}} {
		t.Run(c.name, func(t *testing.T) {
			table := b.Table(t)
			var inst [2]Guard
			for i := range inst {
				inst[i] = b.Guard(t, table, Sound, dlock.WithWait(20*time.Second))
			}
			var executions atomic.Int32
			var mu sync.Mutex
			results, errs := map[string]int{}, []error(nil)
			charge := func(ctx context.Context, tx Tx, fence uint64) error {
				executions.Add(1)
				if err := tx.Work(ctx); err != nil {
					return err
				}
				return tx.Charge(ctx, "order-1", fence)
			}
			gate := make(chan struct{})
			var wg sync.WaitGroup
			for i := range 20 {
				in := inst[i%2]
				wg.Go(func() {
					<-gate
					val, err := []byte("unguarded"), error(nil)
					if c.guarded {
						var r dlock.Result
						r, err = in.DoTx(ctx(t), "order-1", "fp", c.mode, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
							return fmt.Appendf(nil, "charged at fence %d", e.Fence), charge(ctx, tx, e.Fence)
						})
						val = r.Value
					} else {
						err = in.Plain(ctx(t), func(ctx context.Context, tx Tx) error { return charge(ctx, tx, 0) })
					}
					mu.Lock()
					defer mu.Unlock()
					results[string(val)]++
					if err != nil {
						errs = append(errs, err)
					}
				})
			}
			close(gate)
			wg.Wait()
			n := inst[0].Charges(t, "order-1")
			t.Logf("20 calls: %d executions, %d business rows, results %v", executions.Load(), n, results)
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("calls failed: %v", err)
			}
			switch {
			case c.guarded && (n != 1 || executions.Load() != 1 || len(results) != 1):
				t.Fatalf("guarded: %d business rows, %d executions, %d distinct results; want 1, 1, 1", n, executions.Load(), len(results))
			case !c.guarded && n <= 1:
				t.Fatalf("control: %d business rows from 20 unguarded calls; want more than 1", n)
			}
		})
	}
}
