package drivertest

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// raceRecord is what the racers of testRace observe together.
type raceRecord struct {
	inside    atomic.Int32 // goroutines inside the critical section now
	overlaps  atomic.Int32 // entries that found another goroutine inside
	mu        sync.Mutex
	lastFence uint64
	sections  int
	inverted  []string // fences out of holding order
	unknown   int      // Acquire errors that are no definite answer
	errs      []error
}

func (r *raceRecord) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// testRace: Goroutines goroutines on each of Clients clients race for one
// key with Acquire (retrying after contention with short jittered pauses:
// load, not synchronisation). The rule checked is mutual exclusion with a
// fence per holding: an in-critical-section counter that ever exceeds one is
// an overlap, and fences must strictly increase in holding order. It
// reports overlaps, not successes; every goroutine must get the key Rounds
// times within the time bound. An Acquire whose outcome is unknown (an error
// matching no sentinel, such as a Redlock split vote) is given back and
// retried, as the client does; a definite error other than contention
// fails the case.
func (s *suite) testRace(t *testing.T, m driver.Mutex) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (%d clients × %d goroutines × %d rounds)", seed, s.h.Clients, s.h.Goroutines, s.h.Rounds)
	clients := []driver.Mutex{m}
	for len(clients) < s.h.Clients {
		clients = append(clients, s.client(t))
	}
	key := Key(t)
	deadline := time.Now().Add(30*time.Second + 10*s.slack)
	var rec raceRecord
	var wg sync.WaitGroup
	for c, cl := range clients {
		for g := range s.h.Goroutines {
			rng := rand.New(rand.NewPCG(seed, uint64(c*1000+g)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.racer(t, cl, key, rng, deadline, &rec)
			}()
		}
	}
	wg.Wait()
	want := s.h.Clients * s.h.Goroutines * s.h.Rounds
	for _, err := range rec.errs[:min(len(rec.errs), 5)] {
		t.Errorf("racer: %v", err)
	}
	if n := rec.overlaps.Load(); n > 0 {
		t.Errorf("%d overlaps in %d critical sections: two holders of one key at once (seed %d)", n, rec.sections, seed)
	}
	if len(rec.inverted) > 0 {
		t.Errorf("%d fences out of holding order, first: %s (seed %d)", len(rec.inverted), rec.inverted[0], seed)
	}
	if rec.sections != want {
		t.Errorf("%d of %d critical sections completed before the deadline (seed %d)", rec.sections, want, seed)
	}
	t.Logf("%d critical sections, %d overlaps, %d fence inversions, %d acquisitions with an unknown outcome", rec.sections, rec.overlaps.Load(), len(rec.inverted), rec.unknown)
}

// racer takes key Rounds times on client m, recording in rec.
func (s *suite) racer(t *testing.T, m driver.Mutex, key string, rng *rand.Rand, deadline time.Time, rec *raceRecord) {
	c := ctx(t)
	for done := 0; done < s.h.Rounds; {
		if time.Now().After(deadline) {
			rec.fail(errors.New("deadline passed"))
			return
		}
		tok := Token()
		g, err := m.Acquire(c, key, tok, s.long)
		if errors.Is(err, driver.ErrNotAcquired) {
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
			continue
		}
		if errors.Is(err, driver.ErrInvalid) || errors.Is(err, driver.ErrRefused) || errors.Is(err, driver.ErrNotHeld) {
			rec.fail(err)
			return
		}
		if err != nil {
			// Outcome unknown (package driver): give the token back, as
			// the client does, and try again with a new one.
			_ = m.Release(c, key, tok)
			rec.mu.Lock()
			rec.unknown++
			rec.mu.Unlock()
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
			continue
		}
		s.section(rng, g.Fence, rec)
		if err := m.Release(c, key, tok); err != nil {
			rec.fail(err) // and go on: a lost holding is an overlap to count
		}
		done++
	}
}

// section is one critical section: it counts who else is inside and checks
// the fence against the holding before.
func (s *suite) section(rng *rand.Rand, fence uint64, rec *raceRecord) {
	if rec.inside.Add(1) > 1 {
		rec.overlaps.Add(1)
	}
	rec.mu.Lock()
	if fence <= rec.lastFence {
		rec.inverted = append(rec.inverted, strconv.FormatUint(fence, 10)+" after "+strconv.FormatUint(rec.lastFence, 10))
	}
	rec.lastFence = max(rec.lastFence, fence)
	rec.sections++
	rec.mu.Unlock()
	runtime.Gosched()
	time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond) // work: widens the window an overlap needs
	rec.inside.Add(-1)
}
