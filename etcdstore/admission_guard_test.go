package etcdstore_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
)

// admissionRace runs clients × goroutines racers, each taking k (1 or 2)
// of key's limit permits rounds times on its client, and counts the
// entries that found more than limit permits inside (overlaps).
func admissionRace(t *testing.T, stores []*etcdstore.Store, key string, limit, goroutines, rounds int, seed uint64) (overlaps, sections int) {
	t.Helper()
	var inside, over, done atomic.Int32
	var wg sync.WaitGroup
	ctx := ctxT(t, 60*time.Second)
	for c, s := range stores {
		for g := range goroutines {
			rng := rand.New(rand.NewPCG(seed, uint64(c*100+g)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for got, tries := 0, 0; got < rounds && tries < 2000; tries++ {
					tk, k := tok(), 1+rng.IntN(2)
					_, err := s.AcquirePermits(ctx, key, tk, limit, k, time.Minute)
					if err != nil {
						if !errors.Is(err, driver.ErrNotAcquired) {
							_ = s.ReleasePermits(ctx, key, tk) // outcome unknown: give back
						}
						continue
					}
					if inside.Add(int32(k)) > int32(limit) {
						over.Add(1)
					}
					time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond) // the work: widens a window
					inside.Add(-int32(k))
					if err := s.ReleasePermits(ctx, key, tk); err != nil {
						t.Errorf("ReleasePermits: %v", err)
					}
					done.Add(1)
					got++
				}
			}()
		}
	}
	wg.Wait()
	return int(over.Load()), int(done.Load())
}

// TestSemaphoreAdmissionIsGuarded: acquirers on three clients never hold
// more than the limit together, because each admission is a transaction
// guarded by the revision of the read it decided on. Negative control: a
// store whose retry after that read is not guarded over-admits in the same
// race.
func TestSemaphoreAdmissionIsGuarded(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	run := func(unguarded bool) (int, int) {
		var stores []*etcdstore.Store
		for range 3 {
			s, _ := newStore(t, c, pfx, 5*time.Second)
			etcdstore.SetUnguarded(s, unguarded)
			stores = append(stores, s)
		}
		return admissionRace(t, stores, "sem-"+tok()[:6], 2, 4, 6, seed)
	}
	over, n := run(false)
	t.Logf("guarded: %d overlaps in %d holdings", over, n)
	if over > 0 {
		t.Fatalf("%d overlaps in %d holdings: more than 2 of 2 permits out at once (seed %d)", over, n, seed)
	}
	if n != 3*4*6 {
		t.Fatalf("%d of %d holdings completed (seed %d)", n, 3*4*6, seed)
	}
	for i := range 3 { // the control: overlaps are likely, not certain, in one run
		over, n = run(true)
		t.Logf("control run %d, unguarded: %d overlaps in %d holdings", i, over, n)
		if over > 0 {
			return
		}
	}
	t.Fatalf("the unguarded control never over-admitted in 3 runs: the race does not test the guard (seed %d)", seed)
}

// rwRace runs goroutines racers on each store, each taking key rounds
// times (a write one time in three, else a read), and counts the entries
// that broke the rule: a writer with anyone inside, or a reader with a
// writer inside.
func rwRace(t *testing.T, stores []*etcdstore.Store, key string, goroutines, rounds int, seed uint64) (overlaps, sections int) {
	t.Helper()
	var readers, writers, over, done atomic.Int32
	var wg sync.WaitGroup
	ctx := ctxT(t, 60*time.Second)
	for c, s := range stores {
		for g := range goroutines {
			rng := rand.New(rand.NewPCG(seed, uint64(c*100+g)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for got, tries := 0, 0; got < rounds && tries < 3000; tries++ {
					tk, write := tok(), rng.IntN(3) == 0
					var err error
					if write {
						_, err = s.AcquireWrite(ctx, key, tk, time.Minute)
					} else {
						_, err = s.AcquireRead(ctx, key, tk, time.Minute)
					}
					if err != nil {
						if !errors.Is(err, driver.ErrNotAcquired) {
							_ = s.ReleaseRW(ctx, key, tk) // outcome unknown: give back
						}
						time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // load, not synchronisation
						continue
					}
					if write {
						if writers.Add(1) > 1 || readers.Load() > 0 {
							over.Add(1)
						}
					} else if readers.Add(1); writers.Load() > 0 {
						over.Add(1)
					}
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // the work: widens a window
					if write {
						writers.Add(-1)
					} else {
						readers.Add(-1)
					}
					if err := s.ReleaseRW(ctx, key, tk); err != nil {
						t.Errorf("ReleaseRW: %v", err)
					}
					done.Add(1)
					got++
				}
			}()
		}
	}
	wg.Wait()
	return int(over.Load()), int(done.Load())
}

// TestRWAdmissionIsGuarded: readers and writers on three clients never
// overlap a writer, because each admission is one transaction whose guards
// are the other mode's keys. Negative control: readers admitted without the
// writer guards overlap writers in the same race.
func TestRWAdmissionIsGuarded(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	run := func(unguarded bool) (int, int) {
		var stores []*etcdstore.Store
		for range 3 {
			s, _ := newStore(t, c, pfx, 5*time.Second)
			etcdstore.SetUnguarded(s, unguarded)
			stores = append(stores, s)
		}
		return rwRace(t, stores, "rw-"+tok()[:6], 4, 6, seed)
	}
	over, n := run(false)
	t.Logf("guarded: %d overlaps in %d holdings", over, n)
	if over > 0 || n != 3*4*6 {
		t.Fatalf("%d overlaps in %d of %d holdings (seed %d): want none, all completed", over, n, 3*4*6, seed)
	}
	for i := range 3 { // the control: overlaps are likely, not certain, in one run
		over, n = run(true)
		t.Logf("control run %d, readers ignoring writers: %d overlaps in %d holdings", i, over, n)
		if over > 0 {
			return
		}
	}
	t.Fatalf("the unguarded control never overlapped in 3 runs: the race does not test the guards (seed %d)", seed)
}
