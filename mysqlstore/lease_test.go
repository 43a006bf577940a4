package mysqlstore_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestLeaseBasics walks one key through acquire, re-entry, contention,
// extend and release, checking each answer.
func TestLeaseBasics(t *testing.T) {
	s := newStore(t, mysqlstore.Options{})
	c := ctxT(t)
	g, err := s.Acquire(c, "k", "a", time.Minute)
	if err != nil || g.Holds != 1 || g.Fence == 0 {
		t.Fatalf("acquire: %+v %v", g, err)
	}
	g2, err := s.Acquire(c, "k", "a", time.Second)
	if err != nil || g2.Holds != 2 || g2.Fence != g.Fence {
		t.Fatalf("re-entry: %+v %v", g2, err)
	}
	_, err = s.Acquire(c, "k", "b", time.Minute)
	var ce *driver.ContendedError
	if !errors.As(err, &ce) || ce.Remaining < 50*time.Second || ce.Remaining > time.Minute {
		t.Fatalf("contended: %v", err)
	}
	if _, err := s.Extend(c, "k", "b", time.Minute); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("extend by another: %v", err)
	}
	if _, err := s.Extend(c, "nokey", "b", time.Minute); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("extend of a missing key: %v", err)
	}
	if e, err := s.Extend(c, "k", "a", time.Minute); err != nil || e.Fence != g.Fence || e.Holds != 2 {
		t.Fatalf("extend: %+v %v", e, err)
	}
	if err := s.Release(c, "k", "b"); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("release by another: %v", err)
	}
	for i := range 2 {
		if err := s.Release(c, "k", "a"); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	if err := s.Release(c, "k", "a"); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("release of a free key: %v", err)
	}
	g3, err := s.Acquire(c, "k", "b", time.Minute)
	if err != nil || g3.Fence <= g.Fence {
		t.Fatalf("next holder: %+v %v (previous fence %d)", g3, err, g.Fence)
	}
	if s.Deadlocks() != 0 {
		t.Fatalf("%d deadlocks", s.Deadlocks())
	}
}

// TestLeaseNoDeadlocks: 2 stores (own pools) × 50 goroutines take one key
// 3 times each, with the sweep due on every call (Retention 1 ms), under
// the server's default REPEATABLE READ and under READ COMMITTED (set in
// the DSN). Invariants: no overlap, fences increase, and zero deadlocks
// (the server's error 1213, counted by the store, retries included).
func TestLeaseNoDeadlocks(t *testing.T) {
	for _, level := range []string{"", "tx_isolation=%27READ-COMMITTED%27"} {
		t.Run("level="+level, func(t *testing.T) {
			_, opts := migrated(t, mysqlstore.Options{Retention: time.Millisecond, SweepEvery: time.Millisecond})
			var stores []*mysqlstore.Store
			for range 2 {
				db := openDB(t, shared(t).DSN(level))
				var iso string
				if err := db.QueryRow("SELECT @@tx_isolation").Scan(&iso); err != nil || (level != "") != (iso == "READ-COMMITTED") {
					t.Fatalf("isolation %q, %v for DSN parameter %q", iso, err, level)
				}
				s, err := mysqlstore.New(db, opts)
				if err != nil {
					t.Fatal(err)
				}
				stores = append(stores, s)
			}
			var inside, overlaps, sections atomic.Int32
			var mu sync.Mutex
			var last uint64
			var wg sync.WaitGroup
			deadline := time.Now().Add(120 * time.Second)
			for i := range 100 {
				s := stores[i%2]
				wg.Add(1)
				go func() {
					defer wg.Done()
					for done := 0; done < 3 && time.Now().Before(deadline); {
						tok := fmt.Sprint("tok", i, done)
						g, err := s.Acquire(ctxT(t), "hot", tok, 10*time.Second)
						if err != nil {
							// Backoff between attempts, as a Client does
							// (not synchronisation): spinning starves the
							// server on 2 cores.
							time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
							continue
						}
						if inside.Add(1) > 1 {
							overlaps.Add(1)
						}
						mu.Lock()
						if g.Fence <= last {
							overlaps.Add(1)
						}
						last = g.Fence
						mu.Unlock()
						inside.Add(-1)
						if err := s.Release(ctxT(t), "hot", tok); err != nil {
							t.Errorf("release: %v", err)
						}
						sections.Add(1)
						done++
					}
				}()
			}
			wg.Wait()
			d := stores[0].Deadlocks() + stores[1].Deadlocks()
			t.Logf("%d sections, %d overlaps or fence inversions, %d deadlocks", sections.Load(), overlaps.Load(), d)
			if sections.Load() != 300 || overlaps.Load() != 0 || d != 0 {
				t.Fatalf("%d of 300 sections, %d overlaps/inversions, %d deadlocks", sections.Load(), overlaps.Load(), d)
			}
		})
	}
}

// TestLeaseTableBounded: 3000 distinct keys, each acquired and released
// once (a few seconds), with Retention 200 ms and a sweep due every 100
// ms. The table stays bounded by the keys freed lately, not by the keys
// ever locked: at every sample (each 50 keys) the rows must not exceed
// the keys released in the last 700 ms (Retention, two sweep periods and
// 300 ms of slack for a loaded machine) plus 150. Counting the window's
// own keys, not an average rate, keeps the bound true when the pace
// bursts. Control: a store whose retention is an hour adds a row per key.
func TestLeaseTableBounded(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{Retention: 200 * time.Millisecond, SweepEvery: 100 * time.Millisecond})
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	c := ctxT(t)
	rows := func() int {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM " + opts.Table + "_locks").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const keys, window, slack = 3000, 700 * time.Millisecond, 150
	released := make([]time.Time, 0, keys)
	worst, worstLimit, peak := 0, 0, 0
	start := time.Now()
	for i := range keys {
		k := fmt.Sprint("key-", i)
		if _, err := s.Acquire(c, k, "t", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(c, k, "t"); err != nil {
			t.Fatal(err)
		}
		released = append(released, time.Now())
		if i%50 != 0 {
			continue
		}
		n := rows()
		peak = max(peak, n)
		// Keys released since now-window: the sweep may not yet have
		// had the chance to delete these.
		cut := time.Now().Add(-window)
		recent := len(released) - sort.Search(len(released), func(j int) bool { return released[j].After(cut) })
		if limit := recent + slack; n-limit > worst-worstLimit || worstLimit == 0 {
			worst, worstLimit = n, limit
		}
	}
	el := time.Since(start)
	t.Logf("%d keys in %v (%.0f/s): peak %d rows; closest sample %d rows against a limit of %d", keys, el.Round(time.Millisecond), float64(keys)/el.Seconds(), peak, worst, worstLimit)
	if worst > worstLimit {
		t.Fatalf("%d rows while only %d keys were released in the last %v: the sweep does not bound the table (limit %d)", worst, worstLimit-slack, window, worstLimit)
	}
	// Control: with a retention of an hour nothing is swept and the table
	// grows with every key (300 more rows).
	long, _ := mysqlstore.New(db, mysqlstore.Options{Table: opts.Table, Retention: time.Hour, SweepEvery: time.Millisecond})
	before := rows()
	for i := range 300 {
		k := fmt.Sprint("ctl-", i)
		if _, err := long.Acquire(c, k, "t", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := long.Release(c, k, "t"); err != nil {
			t.Fatal(err)
		}
	}
	if n := rows() - before; n != 300 {
		t.Fatalf("control: %d rows added by 300 keys without a sweep, want 300", n)
	}
	if _, err := db.Exec("DELETE FROM " + opts.Table + "_locks WHERE name LIKE 'ctl-%'"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for rows() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows left 5 s after the last release", rows())
		}
		if _, err := s.Sweep(c); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // polling until Retention passes, bounded
	}
}

// Acquire's statement is prepared on the server (once per connection) and
// Close deallocates it: the server's count of prepared statements goes up
// with the first Acquire and back down with Close. After Close, Acquire is
// refused (ErrInvalid) while Release still ends the holding.
func TestAcquirePreparedAndClose(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	count := func() int {
		var name string
		var n int
		if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	before := count()
	ctx := ctxT(t)
	if _, err := s.Acquire(ctx, "p", "tok", time.Minute); err != nil {
		t.Fatal(err)
	}
	if after := count(); after <= before {
		t.Fatalf("prepared statements %d before the first Acquire, %d after: not prepared", before, after)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != before {
		t.Errorf("prepared statements after Close: %d, want %d", n, before)
	}
	if _, err := s.Acquire(ctx, "q", "tok", time.Minute); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Acquire after Close: %v, want ErrInvalid", err)
	}
	if err := s.Release(ctx, "p", "tok"); err != nil {
		t.Errorf("Release after Close: %v", err)
	}
}
