package pgstore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// rows counts the rows of table's lease table.
func rows(t *testing.T, admin *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(ctx(t), "SELECT count(*) FROM "+table+"_locks").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// lockMany takes n distinct keys with a short lease, releasing every other
// one and leaving the rest to expire.
func lockMany(t *testing.T, s *pgstore.Store, n int, ttl time.Duration) {
	t.Helper()
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				key, tk := fmt.Sprintf("many/%d", i), tok()
				if _, err := s.Acquire(ctx(t), key, tk, ttl); err != nil {
					errs <- err
					return
				}
				if i%2 == 0 {
					if err := s.Release(ctx(t), key, tk); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestTableStaysBounded locks 10 000 distinct keys briefly (half released,
// half left to expire): after the store's retention (its sweep interval)
// the table is back to 0 rows. Control: the same with the sweep off keeps
// every row (released rows stay, free, for the key's next Acquire).
func TestTableStaysBounded(t *testing.T) {
	// The lease must outlast the time between one key's Acquire and
	// Release on a slow machine (under -race): a release after the lease
	// ended is refused.
	const n, ttl, sweep = 10000, 3 * time.Second, 500 * time.Millisecond
	admin := newPool(t)
	run := func(sweepEvery time.Duration, until func(rows int) bool) (afterLock, after int) {
		s := newStore(t, newPool(t), pgstore.Options{SweepInterval: sweepEvery})
		start := time.Now()
		lockMany(t, s, n, ttl)
		afterLock = rows(t, admin, s.Table())
		t.Logf("sweep %v: %d keys locked in %v; %d rows right after", sweepEvery, n, time.Since(start), afterLock)
		deadline := start.Add(ttl + sweep + 10*time.Second)
		for after = afterLock; !until(after) && time.Now().Before(deadline); after = rows(t, admin, s.Table()) {
			time.Sleep(50 * time.Millisecond) // polling with a deadline
		}
		t.Logf("sweep %v: %d rows %v after the start", sweepEvery, after, time.Since(start))
		return afterLock, after
	}
	_, left := run(sweep, func(rows int) bool { return rows == 0 })
	if left != 0 {
		t.Fatalf("%d rows left (lease %v, sweep every %v)", left, ttl, sweep)
	}
	t.Run("NoSweepControl", func(t *testing.T) {
		var passed time.Time
		_, left := run(-1, func(int) bool {
			if passed.IsZero() {
				passed = time.Now().Add(ttl + 2*sweep) // every lease has ended, a sweep would have run twice
			}
			return time.Now().After(passed)
		})
		if left != n {
			t.Fatalf("without a sweep %d rows are left; want all %d (released and expired: the count is not blind)", left, n)
		}
	})
}
