package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// spin runs goroutines on clients stores that take one key in a tight loop
// (a contended attempt retries at once) for d, while the first store's
// sweeper deletes the freed row again and again (so that acquires also take
// the insert branch, and race the sweep), and counts critical sections
// whose fence is not greater than the previous section's.
func spin(t *testing.T, clients, goroutines int, d time.Duration) (sections, inversions int, swept int64) {
	t.Helper()
	table := uniqTable(t, newPool(t))
	var (
		mu        sync.Mutex
		last      uint64
		inside    atomic.Int32
		wg        sync.WaitGroup
		sweptRows atomic.Int64
	)
	stop := time.Now().Add(d)
	for i := range clients {
		s := newStore(t, newPool(t), pgstore.Options{Table: table})
		if i == 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
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
				for time.Now().Before(stop) {
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
// update of a free row and the insert under the advisory lock). The
// inversion a wrong statement allows needs a rare interleaving, which the
// spin cannot be counted on to hit; interleave forces it, for the store
// (no inversion) and for the negative control, a fence drawn at the start
// of the statement, before the row lock, as the first version of the
// statement did through its insert (an inversion, every time).
func TestFencesFollowHoldingOrder(t *testing.T) {
	n, inv, swept := spin(t, 2, 8, 3*time.Second)
	t.Logf("fence drawn under the row lock: %d sections, %d inversions, %d rows swept", n, inv, swept)
	if n < 10 || inv != 0 || swept == 0 {
		t.Fatalf("%d sections, %d fences out of order, %d rows swept; want >= 10, 0 and > 0", n, inv, swept)
	}
	t.Run("Interleaved", func(t *testing.T) {
		between, got := interleave(t, false)
		t.Logf("holding made while the acquire waited: fence %d; the acquire's: %d", between, got)
		if got <= between {
			t.Fatalf("the acquire that waited for the row got fence %d, not above the %d of the holding made meanwhile", got, between)
		}
	})
	t.Run("EarlyFenceControl", func(t *testing.T) {
		between, got := interleave(t, true)
		t.Logf("fence drawn before the row lock: holding made meanwhile %d; the acquire's %d", between, got)
		if got > between {
			t.Fatalf("with the fence drawn early the acquire got %d, above the %d of the holding made while it waited: the interleaving does not show the bug", got, between)
		}
	})
}

// interleave runs, on a fresh table, the interleaving that gives a fence
// drawn too early away: the key's row is free and row-locked by a test
// transaction; an acquire starts and waits for the row; the transaction
// then makes a holding of its own with a fence from the table's sequence
// and ends it (another client's holding, made and released while the
// acquire waited) and commits. It returns that holding's fence and the
// fence the acquire got (an early store's (WithEarlyFence, if early) drawn
// before the wait).
func interleave(t *testing.T, early bool) (between, got uint64) {
	t.Helper()
	pool := newPool(t)
	s := newStore(t, newPool(t), pgstore.Options{})
	if early {
		pgstore.WithEarlyFence(s)
	}
	first := tok()
	if _, err := s.Acquire(ctx(t), "hot", first, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx(t), "hot", first); err != nil {
		t.Fatal(err)
	}
	locks := s.Table() + "_locks"
	tx, err := pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx(t), `SELECT 1 FROM `+locks+` WHERE name = 'hot' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		g   driver.Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := s.Acquire(ctx(t), "hot", tok(), 10*time.Second)
		done <- result{g, err}
	}()
	waitBlocked(t, pool, locks)
	err = tx.QueryRow(ctx(t), `UPDATE `+locks+` SET owner = 'between', holds = 1, fence = nextval('`+s.Table()+`_fence'),
  expires_at = timestamptz 'epoch' WHERE name = 'hot' RETURNING fence`).Scan(&between)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("the acquire that waited for the row: %v", r.err)
	}
	return between, r.g.Fence
}

// waitBlocked returns once a statement on table waits for a lock (the
// acquire behind the test's row lock); it fails the test after 10 s.
func waitBlocked(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := pool.QueryRow(ctx(t), `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND position($1 in query) > 0`, table).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the acquire never waited for the row the test locked")
		}
		time.Sleep(5 * time.Millisecond) // polling the server's view; bounded by the deadline
	}
}
