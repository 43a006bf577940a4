package pgstore_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
)

// spin runs goroutines on clients stores that take one key in a tight loop
// (a contended attempt retries at once) for d (or, with untilInversion,
// until the first inversion), and counts critical sections whose fence is
// not greater than the previous section's.
func spin(t *testing.T, broken, untilInversion bool, clients, goroutines int, d time.Duration) (sections, inversions int, swept int64) {
	t.Helper()
	table := uniqTable(t, newPool(t))
	var (
		mu     sync.Mutex
		last   uint64
		inside atomic.Int32
		wg     sync.WaitGroup
		found  atomic.Bool
		// one sweeper (the first client's) deletes the freed row again
		// and again, in the correct case
		sweeping  bool
		sweptRows atomic.Int64
	)
	stop := time.Now().Add(d)
	for range clients {
		s := newStore(t, newPool(t), pgstore.Options{Table: table})
		if broken {
			pgstore.WithEarlyFence(s)
		} else if !sweeping {
			sweeping = true
			// One sweeper deletes the freed row again and again, so that
			// acquires also take the insert branch (and race the sweep).
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) && !found.Load() {
					n, err := s.Sweep(ctx(t))
					if err != nil {
						t.Errorf("Sweep: %v", err)
						return
					}
					sweptRows.Add(n)
				}
			}()
		}
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) && !found.Load() {
					tk := tok()
					g, err := s.Acquire(ctx(t), "hot", tk, 10*time.Second)
					var ce *driver.ContendedError
					if errors.As(err, &ce) {
						continue
					}
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					if inside.Add(1) > 1 {
						t.Errorf("two holders at once")
					}
					mu.Lock()
					if g.Fence <= last {
						inversions++
						found.Store(untilInversion)
					}
					last = g.Fence
					sections++
					mu.Unlock()
					inside.Add(-1)
					if err := s.Release(ctx(t), "hot", tk); err != nil {
						t.Errorf("Release: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	return sections, inversions, sweptRows.Load()
}

// TestFencesFollowHoldingOrder: acquires racing on one key in a tight loop
// get fences in the order they hold the key, while a sweeper deletes the
// freed row again and again (so both branches of the statement run: the
// update of a free row and the insert under the advisory lock). Control:
// a fence drawn at the start of the statement, before the row lock (as the
// first version of the statement did through its insert), gives fences out
// of order, because an attempt that waited for the row writes the fence it
// drew before the wait.
func TestFencesFollowHoldingOrder(t *testing.T) {
	n, inv, swept := spin(t, false, false, 2, 8, 3*time.Second)
	t.Logf("fence drawn under the row lock: %d sections, %d inversions, %d rows swept", n, inv, swept)
	if n < 10 || inv != 0 || swept == 0 {
		t.Fatalf("%d sections, %d fences out of order, %d rows swept; want >= 10, 0 and > 0", n, inv, swept)
	}
	t.Run("EarlyFenceControl", func(t *testing.T) {
		n, inv, _ := spin(t, true, true, 2, 8, 20*time.Second)
		t.Logf("fence drawn before the row lock: %d sections, %d inversions", n, inv)
		if inv == 0 {
			t.Fatalf("with the fence drawn early %d sections had no inversion: the race is not reproduced", n)
		}
	})
}
