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
func spin(t *testing.T, broken, untilInversion bool, clients, goroutines int, d time.Duration) (sections, inversions int) {
	t.Helper()
	table := uniqTable(t, newPool(t))
	var (
		mu     sync.Mutex
		last   uint64
		inside atomic.Int32
		wg     sync.WaitGroup
		found  atomic.Bool
	)
	stop := time.Now().Add(d)
	for range clients {
		s := newStore(t, newPool(t), pgstore.Options{Table: table})
		if broken {
			pgstore.WithoutFenceLock(s)
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
	return sections, inversions
}

// TestFencesFollowHoldingOrder: acquires racing on one key in a tight loop
// get fences in the order they hold the key. Control: without the
// per-key advisory lock (the first version of the statement) the same race
// gives fences out of order, because an insert draws its fence before it
// waits for the releasing row.
func TestFencesFollowHoldingOrder(t *testing.T) {
	n, inv := spin(t, false, false, 2, 8, 3*time.Second)
	t.Logf("with the lock: %d sections, %d inversions", n, inv)
	if n < 10 || inv != 0 {
		t.Fatalf("with the lock: %d sections, %d fences out of order; want >= 10 and 0", n, inv)
	}
	t.Run("WithoutTheLockControl", func(t *testing.T) {
		n, inv := spin(t, true, true, 2, 8, 20*time.Second)
		t.Logf("without the lock: %d sections, %d inversions", n, inv)
		if inv == 0 {
			t.Fatalf("without the advisory lock %d sections had no inversion: the race is not reproduced", n)
		}
	})
}
