package sqltest

import (
	"context"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
)

// Bounds of PausedExecutorIsBounded.
const (
	idleBound = time.Second             // the server's bound on an idle transaction
	pauseHold = 2500 * time.Millisecond // how long the executor stays paused at most
)

// PausedExecutorIsBounded: a folded executor that charges and then stays
// idle in its transaction (paused) holds the key, but only for the idle
// bound (1 s): the server ends its session and rolls it back, and a
// duplicate waiting on the key (WithWait) then runs, before the pause ends
// (2.5 s); the paused executor's DoTx fails, its charge gone: one row, the
// duplicate's. Control: the executor lifts the bound in its transaction
// (Tx.Unbound); the duplicate waits for the whole pause and replays the
// executor's result.
func PausedExecutorIsBounded(t *testing.T, b Backend) {
	for _, bounded := range []bool{true, false} {
		name := map[bool]string{true: "Bounded", false: "ControlUnbounded"}[bounded]
		t.Run(name, func(t *testing.T) {
			table := b.Table(t)
			a := b.Idle(t, table, idleBound, dlock.WithTTL(idleBound))
			dup := b.Guard(t, table, Sound, dlock.WithWait(20*time.Second))
			charged, release := make(chan struct{}), make(chan struct{})
			var errA error
			var wg sync.WaitGroup
			wg.Go(func() {
				_, errA = a.DoTx(ctx(t), "order-5", "fp", Folded, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
					if !bounded {
						if err := tx.Unbound(ctx); err != nil {
							return nil, err
						}
					}
					err := tx.Charge(ctx, "order-5", e.Fence)
					close(charged)
					select { // paused: the transaction idle
					case <-release:
					case <-time.After(pauseHold):
					}
					return []byte("A"), err
				})
			})
			<-charged
			start := time.Now()
			r, err := dup.DoTx(ctx(t), "order-5", "fp", Folded, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
				return []byte("B"), tx.Charge(ctx, "order-5", e.Fence)
			})
			took := time.Since(start)
			close(release)
			wg.Wait()
			n := dup.Charges(t, "order-5")
			t.Logf("the duplicate: %q (replayed %v) after %v, %v; the paused executor: %v; %d business rows", r.Value, r.Replayed, took.Round(time.Millisecond), err, errA, n)
			switch {
			case err != nil || n != 1:
				t.Fatalf("the duplicate: %v; %d business rows, want 1", err, n)
			case bounded && (string(r.Value) != "B" || errA == nil || took >= pauseHold):
				t.Fatalf("bounded: the duplicate got %q after %v, the paused executor %v; want the duplicate run within %v and the executor's commit failed", r.Value, took, errA, pauseHold)
			case !bounded && (string(r.Value) != "A" || !r.Replayed || took < pauseHold/2):
				t.Fatalf("control: the duplicate got %q after %v; want the paused executor's result, replayed after its pause", r.Value, took)
			}
		})
	}
}
