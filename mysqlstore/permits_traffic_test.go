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

// TestPermitsMixedTrafficNoDeadlock: 12 goroutines on 3 pools take one of
// 3 permits of 2 keys, extend and release them, or leave a 30 ms holding to
// expire (a crashed holder), while a fourth pool sweeps without pause, for
// 1.5 s. MariaDB reports no deadlock and no call fails. There is no control
// that deadlocks every time: the sweep that deleted expired holdings by
// primary key without the key's anchor (before sweepUnderAnchors) was
// counted 12 to 14 deadlocks in each of 3 runs of 2 s of this traffic.
func TestPermitsMixedTrafficNoDeadlock(t *testing.T) {
	seed := time.Now().UnixNano()
	stores := permitStores(t, 4, func(*mysqlstore.Store) {})
	deadline := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(g)))
			for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
				permitsRound(t, stores[g%3], fmt.Sprint("k", rng.IntN(2)), fmt.Sprintf("g%d-%d", g, i), rng)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
			if _, err := stores[3].Sweep(ctxT(t)); err != nil {
				t.Errorf("Sweep: %v", err)
				return
			}
		}
	}()
	wg.Wait()
	var deadlocks int64
	for _, s := range stores {
		deadlocks += s.Deadlocks()
	}
	if t.Logf("%d deadlocks (seed %d)", deadlocks, seed); deadlocks != 0 {
		t.Fatalf("%d deadlocks (retried), want 0 (seed %d)", deadlocks, seed)
	}
}

// permitsRound takes one permit of key for tok, maybe extends it, and
// releases it, or leaves a 30 ms holding to expire.
func permitsRound(t *testing.T, s *mysqlstore.Store, key, tok string, rng *rand.Rand) {
	ttl, crash := time.Minute, rng.IntN(4) == 0
	if crash {
		ttl = 30 * time.Millisecond
	}
	if _, err := s.AcquirePermits(ctxT(t), key, tok, 3, 1, ttl); err != nil || crash {
		if err != nil && !errors.Is(err, driver.ErrNotAcquired) {
			t.Errorf("AcquirePermits: %v", err)
		}
		return
	}
	if rng.IntN(2) == 0 {
		if _, err := s.ExtendPermits(ctxT(t), key, tok, time.Minute); err != nil {
			t.Errorf("ExtendPermits: %v", err)
		}
	}
	if err := s.ReleasePermits(ctxT(t), key, tok); err != nil {
		t.Errorf("ReleasePermits: %v", err)
	}
}
