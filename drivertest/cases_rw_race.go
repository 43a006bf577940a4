package drivertest

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// rwRaceRecord is what the racers of testRWRace observe together.
type rwRaceRecord struct {
	mu                   sync.Mutex
	readers, writers     int // inside now
	overlaps             int // entries that found a writer with anyone
	mostReaders          int
	fences               map[uint64]bool
	reused               int
	reads, writes, unkwn int
	errs                 []error
}

func (r *rwRaceRecord) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// testRWRace: Goroutines goroutines on each of Clients clients take the
// key Rounds times each, two times in three to read and else to write,
// retrying after a refusal with short jittered pauses (load, not
// synchronisation; shorter than WriterWaitTTL, so waiting writers keep
// their marks). The rule checked is exclusion: a writer entering while
// anyone is inside, or a reader while a writer is, is an overlap (counted,
// not the successes). Every holding's fence must be new, and every
// goroutine must finish within the time bound.
func (s *suite) testRWRace(t *testing.T, m driver.RWMutex) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (%d clients × %d goroutines × %d rounds)", seed, s.h.Clients, s.h.Goroutines, s.h.Rounds)
	clients := []driver.RWMutex{m}
	for len(clients) < s.h.Clients {
		clients = append(clients, s.rwClient(t))
	}
	key := Key(t)
	deadline := time.Now().Add(30*time.Second + 10*s.slack)
	rec := rwRaceRecord{fences: map[uint64]bool{}}
	var wg sync.WaitGroup
	for c, cl := range clients {
		for g := range s.h.Goroutines {
			rng := rand.New(rand.NewPCG(seed, uint64(c*1000+g)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.rwRacer(t, cl, key, rng, deadline, &rec)
			}()
		}
	}
	wg.Wait()
	for _, err := range rec.errs[:min(len(rec.errs), 5)] {
		t.Errorf("racer: %v", err)
	}
	if rec.overlaps > 0 {
		t.Errorf("%d overlaps in %d holdings: a writer inside with another holder (seed %d)", rec.overlaps, rec.reads+rec.writes, seed)
	}
	if rec.reused > 0 {
		t.Errorf("%d fences granted to two holdings (seed %d)", rec.reused, seed)
	}
	if want := s.h.Clients * s.h.Goroutines * s.h.Rounds; rec.reads+rec.writes != want {
		t.Errorf("%d of %d holdings completed before the deadline (seed %d)", rec.reads+rec.writes, want, seed)
	}
	t.Logf("%d reads (at most %d at once), %d writes, %d overlaps, %d acquisitions with an unknown outcome", rec.reads, rec.mostReaders, rec.writes, rec.overlaps, rec.unkwn)
}

// rwRacer takes key Rounds times on client m.
func (s *suite) rwRacer(t *testing.T, m driver.RWMutex, key string, rng *rand.Rand, deadline time.Time, rec *rwRaceRecord) {
	c := ctx(t)
	pause := func() { time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) }
	for done := 0; done < s.h.Rounds; {
		if time.Now().After(deadline) {
			rec.fail(errors.New("deadline passed"))
			return
		}
		mode := driver.RWRead
		if rng.IntN(3) == 0 {
			mode = driver.RWWrite
		}
		tok := Token()
		for {
			g, err := rwAcquire(c, m, key, tok, mode, s.long)
			switch {
			case errors.Is(err, driver.ErrNotAcquired) && time.Now().Before(deadline):
				pause() // the same token again: a waiting writer renews its mark
				continue
			case errors.Is(err, driver.ErrNotAcquired):
				rec.fail(errors.New("deadline passed while waiting"))
				return
			case errors.Is(err, driver.ErrInvalid) || errors.Is(err, driver.ErrRefused) || errors.Is(err, driver.ErrNotHeld):
				rec.fail(err)
				return
			case err != nil: // outcome unknown: give the token's holding back, try again
				_ = m.ReleaseRW(c, key, tok)
				rec.mu.Lock()
				rec.unkwn++
				rec.mu.Unlock()
				pause()
				tok = Token()
				continue
			}
			s.rwSection(rng, mode, g.Fence, rec)
			if err := m.ReleaseRW(c, key, tok); err != nil {
				rec.fail(err)
			}
			break
		}
		done++
	}
}

// rwSection is one holding's work: it counts who is inside.
func (s *suite) rwSection(rng *rand.Rand, mode driver.RWMode, fence uint64, rec *rwRaceRecord) {
	rec.mu.Lock()
	if rec.writers > 0 || (mode == driver.RWWrite && rec.readers > 0) {
		rec.overlaps++
	}
	if mode == driver.RWWrite {
		rec.writers++
		rec.writes++
	} else {
		rec.readers++
		rec.reads++
		rec.mostReaders = max(rec.mostReaders, rec.readers)
	}
	if rec.fences[fence] {
		rec.reused++
	}
	rec.fences[fence] = true
	rec.mu.Unlock()
	time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond) // work: widens the window an overlap needs
	rec.mu.Lock()
	if mode == driver.RWWrite {
		rec.writers--
	} else {
		rec.readers--
	}
	rec.mu.Unlock()
}
