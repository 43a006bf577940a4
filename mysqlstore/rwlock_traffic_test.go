package mysqlstore_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestRWMixedTrafficNoDeadlockNoOverlap: 12 goroutines on 3 pools take
// read and write holdings of 2 keys, extend them (shorter and longer),
// downgrade writes and release, or leave a 30 ms holding to expire (a
// crashed holder, not counted), while a fourth pool sweeps without pause,
// for 1.5 s. No writer is ever inside with anyone (counted under a mutex
// each holder takes on entry and on leaving; a downgrade holds it across
// its call), and MariaDB reports no deadlock. Control: the same traffic
// on stores without the anchor's lock (WithRWRace), run until the first
// overlap or for 3 s, is counted overlapping. The deadlock count has no
// control that fails every time: a sweep that deleted a key's expired rows
// without the key's anchor deadlocked with acquisitions in 3 runs of 4
// (see sweepRW).
func TestRWMixedTrafficNoDeadlockNoOverlap(t *testing.T) {
	for _, c := range []struct {
		name   string
		anchor bool
		run    time.Duration
	}{{"Stores", true, 1500 * time.Millisecond}, {"ControlWithoutAnchor", false, 3 * time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			seed := time.Now().UnixNano()
			stores := permitStores(t, 4, func(s *mysqlstore.Store) {
				if !c.anchor {
					mysqlstore.WithRWRace(s, false)
				}
			})
			tr := rwTrafficRun(t, stores, seed, c.run, !c.anchor)
			var deadlocks int64
			for _, s := range stores {
				deadlocks += s.Deadlocks()
			}
			t.Logf("%d holdings, %d overlaps, %d deadlocks (seed %d)", tr.held, tr.overlaps, deadlocks, seed)
			switch {
			case c.anchor && (tr.overlaps != 0 || deadlocks != 0 || tr.held < 20):
				t.Fatalf("%d overlaps and %d deadlocks in %d holdings (seed %d); want none, in at least 20", tr.overlaps, deadlocks, tr.held, seed)
			case !c.anchor && tr.overlaps == 0:
				t.Fatalf("control: no overlap in %d holdings without the anchor's lock (seed %d); the count would miss one", tr.held, seed)
			}
		})
	}
}

// rwTrafficRun runs the traffic on stores (the last one sweeps) for d, or
// until the first overlap if untilOverlap.
func rwTrafficRun(t *testing.T, stores []*mysqlstore.Store, seed int64, d time.Duration, untilOverlap bool) *rwTraffic {
	tr := &rwTraffic{}
	deadline := time.Now().Add(d)
	going := func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return time.Now().Before(deadline) && !(untilOverlap && tr.overlaps > 0)
	}
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(g)))
			for i := 0; i < 1000 && going(); i++ {
				tr.round(t, stores[g%3], "k"+string(rune('0'+rng.IntN(2))), fmt.Sprintf("g%d-%d", g, i), rng)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 1000 && going(); i++ {
			if _, err := stores[3].Sweep(ctxT(t)); err != nil {
				t.Errorf("Sweep: %v", err)
				return
			}
		}
	}()
	wg.Wait()
	return tr
}

// rwTraffic counts, per key, the holders inside and the moments a writer
// was inside with anyone.
type rwTraffic struct {
	mu               sync.Mutex
	readers, writers map[string]int
	held, overlaps   int
}

func (tr *rwTraffic) enter(key string, mode driver.RWMode, d int) {
	if tr.readers == nil {
		tr.readers, tr.writers = map[string]int{}, map[string]int{}
	}
	if mode == driver.RWWrite {
		tr.writers[key] += d
	} else {
		tr.readers[key] += d
	}
	if d > 0 {
		tr.held++
		if tr.writers[key] > 1 || (tr.writers[key] == 1 && tr.readers[key] > 0) {
			tr.overlaps++
		}
	}
}

// round takes key for tok in a random mode, maybe extends and downgrades it, and
// releases it.
func (tr *rwTraffic) round(t *testing.T, s *mysqlstore.Store, key, tok string, rng *rand.Rand) {
	mode := driver.RWMode(1 + rng.IntN(2))
	acquire := s.AcquireRead
	if mode == driver.RWWrite {
		acquire = s.AcquireWrite
	}
	ttl, crash := time.Minute, rng.IntN(4) == 0
	if crash { // a crashed holder: left to expire, uncounted, so that acquisitions and the sweep delete expired rows
		ttl = 30 * time.Millisecond
	}
	if _, err := acquire(ctxT(t), key, tok, ttl); err != nil || crash {
		if err != nil && !errors.Is(err, driver.ErrNotAcquired) {
			t.Errorf("acquire %v: %v", mode, err)
		}
		return
	}
	tr.mu.Lock()
	tr.enter(key, mode, 1)
	tr.mu.Unlock()
	if rng.IntN(2) == 0 {
		if _, err := s.ExtendRW(ctxT(t), key, tok, time.Duration(30+rng.IntN(60))*time.Second); err != nil {
			t.Errorf("ExtendRW: %v", err)
		}
	}
	if mode == driver.RWWrite && rng.IntN(2) == 0 {
		tr.mu.Lock() // no reader counts itself in before the downgrade is counted
		if _, err := s.AcquireRead(ctxT(t), key, tok, time.Minute); err != nil {
			t.Errorf("downgrade: %v", err)
		}
		tr.enter(key, driver.RWWrite, -1)
		tr.enter(key, driver.RWRead, 1)
		tr.mu.Unlock()
		mode = driver.RWRead
	}
	tr.mu.Lock()
	tr.enter(key, mode, -1)
	tr.mu.Unlock()
	if err := s.ReleaseRW(ctxT(t), key, tok); err != nil {
		t.Errorf("ReleaseRW: %v", err)
	}
}
