package sqltest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
)

// inFlightHold is how long the running transaction of InFlightAtOnce is
// held open at most.
const inFlightHold = 1500 * time.Millisecond

// InFlightAtOnce: while executor A's folded transaction runs (it has
// charged, and waits), a duplicate on another instance, of the same
// request or of another fingerprint, gets ErrInFlight at once: within
// inFlightHold (1.5 s, a slack of hundreds of times the few milliseconds
// it takes), never queued behind A's uncommitted record. Once A commits,
// the duplicate gets A's result replayed and another fingerprint
// ErrMismatch. Control: a folded begin that waits for the record's row
// (WaitingBegin) is held until A's transaction ends (at inFlightHold), and
// then replays instead of answering in flight.
func InFlightAtOnce(t *testing.T, b Backend) {
	for _, c := range []struct {
		name   string
		broken Broken
	}{{"NoWait", Sound}, {"ControlWaitingBegin", WaitingBegin}} {
		t.Run(c.name, func(t *testing.T) {
			table := b.Table(t)
			a, dup := b.Guard(t, table, Sound), b.Guard(t, table, c.broken)
			started, release := make(chan struct{}), make(chan struct{})
			var errA error
			var wg sync.WaitGroup
			wg.Go(func() {
				_, errA = a.DoTx(ctx(t), "order-4", "fp", Folded, func(ctx context.Context, tx Tx, e dlock.Execution) ([]byte, error) {
					err := tx.Charge(ctx, "order-4", e.Fence)
					close(started)
					select { // the transaction stays open, idle
					case <-release:
					case <-time.After(inFlightHold):
					}
					return []byte("A"), err
				})
			})
			<-started
			start := time.Now()
			r, err := dup.DoTx(ctx(t), "order-4", "fp", Folded, func(context.Context, Tx, dlock.Execution) ([]byte, error) { return nil, errRan })
			took := time.Since(start)
			var errOther error
			if c.broken == Sound {
				_, errOther = dup.DoTx(ctx(t), "order-4", "other", Folded, func(context.Context, Tx, dlock.Execution) ([]byte, error) { return nil, errRan })
			}
			close(release)
			wg.Wait()
			t.Logf("the duplicate answered after %v: %+v, %v (another fingerprint: %v)", took.Round(time.Microsecond), r, err, errOther)
			if errA != nil {
				t.Fatalf("the executor: %v", errA)
			}
			if c.broken != Sound {
				if errors.Is(err, dlock.ErrInFlight) || took < inFlightHold/2 {
					t.Fatalf("control: the waiting begin answered %v after %v; want it held until the transaction ended", err, took)
				}
				return
			}
			if !errors.Is(err, dlock.ErrInFlight) || !errors.Is(errOther, dlock.ErrInFlight) || took >= inFlightHold {
				t.Fatalf("the duplicate: %v after %v, another fingerprint %v; want ErrInFlight both, within %v", err, took, errOther, inFlightHold)
			}
			if r, err := dup.DoTx(ctx(t), "order-4", "fp", Folded, func(context.Context, Tx, dlock.Execution) ([]byte, error) { return nil, errRan }); err != nil || !r.Replayed || string(r.Value) != "A" {
				t.Fatalf("after the commit: %+v, %v; want A's result replayed", r, err)
			}
			if _, err := dup.DoTx(ctx(t), "order-4", "other", Folded, func(context.Context, Tx, dlock.Execution) ([]byte, error) { return nil, errRan }); !errors.Is(err, dlock.ErrMismatch) {
				t.Fatalf("another fingerprint after the commit: %v, want ErrMismatch", err)
			}
			if n := a.Charges(t, "order-4"); n != 1 {
				t.Fatalf("%d business rows, want 1", n)
			}
		})
	}
}
