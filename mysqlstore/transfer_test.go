package mysqlstore_test

import (
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestTransferBasics walks Transfer's answers (a missing, held, re-entered,
// released and expired key) under both of MariaDB's assignment orders
// (left to right, and all at once under sql_mode SIMULTANEOUS_ASSIGNMENT),
// which the other statements of the store are written to survive.
func TestTransferBasics(t *testing.T) {
	for _, mode := range assignModes {
		t.Run("mode="+mode, func(t *testing.T) {
			s, db, opts := storeIn(t, mode)
			transferBasics(t, s, db, opts.Table)
		})
	}
}

func transferBasics(t *testing.T, s *mysqlstore.Store, db *sql.DB, table string) {
	c := ctxT(t)
	if _, err := s.Transfer(c, "k", "a", "b", time.Minute); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("transfer of a missing key: %v, want ErrExpired", err)
	}
	if _, err := s.Transfer(c, "k", "a", "a", time.Minute); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("transfer to itself: %v, want ErrInvalid", err)
	}
	g, err := s.Acquire(c, "k", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transfer(c, "k", "x", "b", time.Minute); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("transfer by a non-holder: %v, want ErrTaken", err)
	}
	g2, err := s.Transfer(c, "k", "a", "b", 30*time.Second)
	if err != nil || g2.Fence <= g.Fence || g2.Holds != 1 || g2.TTL != 30*time.Second {
		t.Fatalf("transfer = %+v, %v; want one hold and a fence above %d", g2, err, g.Fence)
	}
	var holds int
	var left int64
	err = db.QueryRow("SELECT holds, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM "+table+"_locks WHERE name = 'k'").Scan(&holds, &left)
	if err != nil || holds != 1 || left <= 0 || left > (30*time.Second).Microseconds() {
		t.Fatalf("row after the transfer: holds %d, %d µs left, %v; want 1 and at most 30 s", holds, left, err)
	}
	if _, err := s.Transfer(c, "k", "a", "c", time.Minute); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("second transfer by the old holder: %v, want ErrTaken", err)
	}
	if _, err := s.Transfer(c, "k", "x", "b", time.Minute); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("transfer to the current holder by a non-holder: %v, want ErrTaken", err)
	}
	if err := s.Release(c, "k", "a"); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("release by the old holder: %v, want ErrTaken", err)
	}
	if _, err := s.Acquire(c, "k", "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transfer(c, "k", "b", "c", time.Minute); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("transfer of a re-entered key: %v, want ErrInvalid", err)
	}
	for range 2 {
		if err := s.Release(c, "k", "b"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Transfer(c, "k", "b", "c", time.Minute); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("transfer of a released key: %v, want ErrExpired", err)
	}
	short, err := s.Acquire(c, "k", "d", mysqlstore.MinTTL)
	if err != nil {
		t.Fatal(err)
	}
	waitFree(t, s, "k")
	if _, err := s.Transfer(c, "k", "d", "e", time.Minute); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("transfer of an expired holding (fence %d): %v, want ErrExpired", short.Fence, err)
	}
}

// waitFree polls until Inspect reports key free; it fails the test after
// 10 s.
func waitFree(t *testing.T, s *mysqlstore.Store, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		info, err := s.Inspect(ctxT(t), key)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Held {
			return
		}
		time.Sleep(5 * time.Millisecond) // polling the server's view; bounded by the deadline
	}
	t.Fatalf("%s still held after 10 s", key)
}

// handOver runs goroutines on 2 stores (pools of their own) that take one
// key, and about half the time hand it over locally with Transfer before
// releasing, for at most d or perRoutine sections each, while the first
// store's sweeps run on every call (Retention 1 ms: freed rows are deleted
// and re-inserted). It counts critical sections (a holding by Acquire or by
// Transfer), overlaps, and sections whose fence is not greater than the
// previous section's.
func handOver(t *testing.T, goroutines, perRoutine int, d time.Duration, seed uint64) (sections, transfers, bad int64) {
	t.Helper()
	_, opts := migrated(t, mysqlstore.Options{Retention: time.Millisecond, SweepEvery: time.Millisecond})
	var stores []*mysqlstore.Store
	for range 2 {
		s, err := mysqlstore.New(openDB(t, shared(t).DSN()), opts)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	var (
		mu     sync.Mutex
		last   uint64
		inside atomic.Int32
		nBad   atomic.Int64
		nSec   atomic.Int64
		nTr    atomic.Int64
		wg     sync.WaitGroup
	)
	section := func(g driver.Grant) {
		if inside.Add(1) > 1 {
			nBad.Add(1)
		}
		mu.Lock()
		if g.Fence <= last {
			nBad.Add(1)
		}
		last = g.Fence
		mu.Unlock()
		inside.Add(-1)
		nSec.Add(1)
	}
	stop := time.Now().Add(d)
	for i := range 2 * goroutines {
		s := stores[i%2]
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < perRoutine && time.Now().Before(stop); {
				tk := fmt.Sprint("g", i, "-", n)
				g, err := s.Acquire(ctxT(t), "hot", tk, 10*time.Second)
				var ce *driver.ContendedError
				if errors.As(err, &ce) {
					// A client's backoff (not synchronisation): spinning
					// starves the server on 2 cores.
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
					continue
				}
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				section(g)
				n++
				for rng.IntN(2) == 0 && n < perRoutine {
					next := fmt.Sprint("g", i, "-", n)
					g, err = s.Transfer(ctxT(t), "hot", tk, next, 10*time.Second)
					if err != nil {
						t.Errorf("transfer: %v", err)
						return
					}
					tk = next
					section(g)
					nTr.Add(1)
					n++
				}
				if err := s.Release(ctxT(t), "hot", tk); err != nil {
					t.Errorf("release: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if d := stores[0].Deadlocks() + stores[1].Deadlocks(); d != 0 {
		t.Errorf("%d deadlocks", d)
	}
	return nSec.Load(), nTr.Load(), nBad.Load()
}

// TestTransferFenceOrder: under contention (2 stores × 8 goroutines on one
// key, hand-overs by Transfer mixed with releases and acquires, sweeps
// deleting freed rows) no two sections overlap and every section's fence
// is above the one before. The inversion an early fence allows needs an
// interleaving the contention cannot be counted on to hit, so interleave
// forces it: for the store (no inversion), and for the negative control,
// the fence drawn in the VALUES row, before the row lock wait (an
// inversion, every time).
func TestTransferFenceOrder(t *testing.T) {
	seed := rand.Uint64()
	n, tr, bad := handOver(t, 8, 40, 20*time.Second, seed)
	t.Logf("seed %d: %d sections, %d of them by Transfer, %d overlaps or fence inversions", seed, n, tr, bad)
	if n < 50 || tr < 10 || bad != 0 {
		t.Fatalf("seed %d: %d sections, %d transfers, %d overlaps or inversions; want >= 50, >= 10, 0", seed, n, tr, bad)
	}
	t.Run("Interleaved", func(t *testing.T) {
		between, got := interleave(t, false)
		t.Logf("holding made while the transfer waited: fence %d; the transfer's: %d", between, got)
		if got <= between {
			t.Fatalf("the transfer that waited for the row got fence %d, not above the %d of the holding made meanwhile", got, between)
		}
	})
	t.Run("EarlyFenceControl", func(t *testing.T) {
		between, got := interleave(t, true)
		t.Logf("fence drawn before the row lock: holding made meanwhile %d; the transfer's %d", between, got)
		if got > between {
			t.Fatalf("with the fence drawn early the transfer got %d, above the %d of the holding made while it waited: the interleaving does not show the bug", got, between)
		}
	})
}
