package drivertest

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// semRaceLimit is the limit the semaphore race is run with.
const semRaceLimit = 3

// semRaceRecord is what the racers of testSemRace observe together.
type semRaceRecord struct {
	inside   atomic.Int32 // permits held by racers inside now
	overlaps atomic.Int32 // entries that found the limit exceeded
	most     atomic.Int32 // the most permits inside at once
	mu       sync.Mutex
	fences   map[uint64]bool
	reused   int // fences granted twice
	sections int
	unknown  int
	errs     []error
}

func (r *semRaceRecord) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// testSemRace: Goroutines goroutines on each of Clients clients take 1 or 2
// of a key's 3 permits, Rounds times each, retrying after a refusal with
// short jittered pauses (load, not synchronisation). The rule checked is
// the limit: a counter of permits inside that ever exceeds it is an
// overlap (counted, not the successes). Every holding's fence must be new,
// and every goroutine must finish within the time bound.
func (s *suite) testSemRace(t *testing.T, m driver.Semaphore) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (%d clients × %d goroutines × %d rounds, limit %d)", seed, s.h.Clients, s.h.Goroutines, s.h.Rounds, semRaceLimit)
	clients := []driver.Semaphore{m}
	for len(clients) < s.h.Clients {
		clients = append(clients, s.semClient(t))
	}
	key := Key(t)
	deadline := time.Now().Add(30*time.Second + 10*s.slack)
	rec := semRaceRecord{fences: map[uint64]bool{}}
	var wg sync.WaitGroup
	for c, cl := range clients {
		for g := range s.h.Goroutines {
			rng := rand.New(rand.NewPCG(seed, uint64(c*1000+g)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.semRacer(t, cl, key, rng, deadline, &rec)
			}()
		}
	}
	wg.Wait()
	for _, err := range rec.errs[:min(len(rec.errs), 5)] {
		t.Errorf("racer: %v", err)
	}
	if n := rec.overlaps.Load(); n > 0 {
		t.Errorf("%d overlaps in %d holdings: more than %d permits out at once, up to %d (seed %d)", n, rec.sections, semRaceLimit, rec.most.Load(), seed)
	}
	if rec.reused > 0 {
		t.Errorf("%d fences granted to two holdings (seed %d)", rec.reused, seed)
	}
	if want := s.h.Clients * s.h.Goroutines * s.h.Rounds; rec.sections != want {
		t.Errorf("%d of %d holdings completed before the deadline (seed %d)", rec.sections, want, seed)
	}
	t.Logf("%d holdings, %d overlaps, at most %d permits inside, %d acquisitions with an unknown outcome", rec.sections, rec.overlaps.Load(), rec.most.Load(), rec.unknown)
}

// semRacer takes 1 or 2 permits of key Rounds times on client m.
func (s *suite) semRacer(t *testing.T, m driver.Semaphore, key string, rng *rand.Rand, deadline time.Time, rec *semRaceRecord) {
	c := ctx(t)
	pause := func() { time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) }
	for done := 0; done < s.h.Rounds; {
		if time.Now().After(deadline) {
			rec.fail(errors.New("deadline passed"))
			return
		}
		tok, k := Token(), 1+rng.IntN(2)
		g, err := m.AcquirePermits(c, key, tok, semRaceLimit, k, s.long)
		switch {
		case errors.Is(err, driver.ErrNotAcquired):
			pause()
			continue
		case errors.Is(err, driver.ErrInvalid) || errors.Is(err, driver.ErrRefused) || errors.Is(err, driver.ErrNotHeld):
			rec.fail(err)
			return
		case err != nil: // outcome unknown: give the token's permits back, try again
			_ = m.ReleasePermits(c, key, tok)
			rec.mu.Lock()
			rec.unknown++
			rec.mu.Unlock()
			pause()
			continue
		}
		s.semSection(rng, k, g.Fence, rec)
		if err := m.ReleasePermits(c, key, tok); err != nil {
			rec.fail(err)
		}
		done++
	}
}

// semSection is one holding's work: it counts the permits inside.
func (s *suite) semSection(rng *rand.Rand, k int, fence uint64, rec *semRaceRecord) {
	now := rec.inside.Add(int32(k))
	if now > semRaceLimit {
		rec.overlaps.Add(1)
	}
	for m := rec.most.Load(); now > m && !rec.most.CompareAndSwap(m, now); m = rec.most.Load() {
	}
	rec.mu.Lock()
	if rec.fences[fence] {
		rec.reused++
	}
	rec.fences[fence] = true
	rec.sections++
	rec.mu.Unlock()
	runtime.Gosched()
	time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond) // work: widens the window an overlap needs
	rec.inside.Add(-int32(k))
}
