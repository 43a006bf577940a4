package drivertest

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases of the read-write lock suite about writer preference: the
// writer-waiting mark a refused AcquireWrite leaves.

// testRWWaitingWriter: once a writer has been refused, new readers are
// refused (WriterWaiting) while the readers already in keep their holdings
// (re-entry and extension); the writer gets in as soon as they have gone,
// and readers after it.
func (s *suite) testRWWaitingWriter(t *testing.T, m driver.RWMutex) {
	key, a, w := Key(t), Token(), Token()
	ga := s.mustRW(t, m, key, a, driver.RWRead)
	if _, err := m.AcquireWrite(ctx(t), key, w, s.long); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("AcquireWrite with a reader: got %v, want ErrNotAcquired", err)
	}
	other := s.rwClient(t)
	for range 2 {
		te := s.wantRWTaken(t, other, key, driver.RWRead, driver.RWRead)
		if !te.WriterWaiting || te.Readers != 1 {
			t.Fatalf("a new reader while a writer waits: %+v, want WriterWaiting with 1 reader", te)
		}
		if te.Remaining == 0 || te.Remaining > driver.WriterWaitTTL {
			t.Fatalf("a reader refused by the mark alone: Remaining %v, want (0, %v] (the mark's) or negative", te.Remaining, driver.WriterWaitTTL)
		}
	}
	if g := s.mustRW(t, m, key, a, driver.RWRead); g.Fence != ga.Fence || g.Readers != 1 {
		t.Fatalf("the reader's re-entry while a writer waits = %+v, want fence %d, 1 reader", g, ga.Fence)
	}
	mustExtendRW(t, m, key, a, s.long)
	mustReleaseRW(t, m, key, a)
	wc := holderClient(s, m, other)         // the writer retries (through its own session on a session store)
	s.mustRW(t, wc, key, w, driver.RWWrite) // the reader ahead left: at once
	mustReleaseRW(t, wc, key, w)
	mustReleaseRW(t, m, key, s.tookRW(t, m, key, driver.RWRead))
}

// testRWNotStarved: readers overlap endlessly (at each step a new reader
// asks in and the oldest leaves) while a writer asks at each step. The
// writer must get in once the readers that held the key when it first
// asked have left (the bound: one step per reader ahead), and no reader
// may join after its first refusal.
func (s *suite) testRWNotStarved(t *testing.T, m driver.RWMutex) {
	const ahead, steps = 2, 10
	key, w := Key(t), Token()
	readers := s.rwClient(t)
	var held []string
	for range ahead {
		held = append(held, s.tookRW(t, readers, key, driver.RWRead))
	}
	for step := range steps {
		_, err := m.AcquireWrite(ctx(t), key, w, s.long)
		if err == nil {
			if step > ahead || len(held) > 0 {
				t.Fatalf("the writer got in at step %d with %d readers holding; want step %d with none", step, len(held), ahead)
			}
			t.Logf("the writer got in at step %d, once the %d readers ahead had left", step, ahead)
			return
		}
		if !errors.Is(err, driver.ErrNotAcquired) {
			t.Fatalf("AcquireWrite at step %d: %v", step, err)
		}
		tok := Token()
		_, err = readers.AcquireRead(ctx(t), key, tok, s.long)
		switch {
		case err == nil:
			t.Errorf("a new reader joined at step %d, after the writer's first refusal", step)
			held = append(held, tok)
		case !errors.Is(err, driver.ErrNotAcquired):
			t.Fatalf("AcquireRead at step %d: %v", step, err)
		}
		if len(held) > 0 {
			mustReleaseRW(t, readers, key, held[0])
			held = held[1:]
		}
	}
	t.Fatalf("the writer did not get in within %d steps of overlapping readers (%d readers ahead of it)", steps, ahead)
}

// testRWMarkEnds: a writer that keeps retrying keeps new readers out past
// WriterWaitTTL; once it stops, a new reader gets in within WriterWaitTTL
// (plus slack) of its last try.
func (s *suite) testRWMarkEnds(t *testing.T, m driver.RWMutex) {
	key, w := Key(t), Token()
	s.mustRW(t, m, key, Token(), driver.RWRead)
	other := s.rwClient(t)
	end := time.Now().Add(driver.WriterWaitTTL + driver.WriterWaitTTL/2)
	var last time.Time
	for tries := 0; time.Now().Before(end) && tries < 100; tries++ {
		if _, err := m.AcquireWrite(ctx(t), key, w, s.long); !errors.Is(err, driver.ErrNotAcquired) {
			t.Fatalf("AcquireWrite with a reader: got %v, want ErrNotAcquired", err)
		}
		last = time.Now()
		time.Sleep(driver.WriterWaitTTL / 8) // the writer's retry pacing
	}
	if te := s.wantRWTaken(t, other, key, driver.RWRead, driver.RWRead); !te.WriterWaiting {
		t.Fatalf("a new reader %v after the writer first asked, while it retried: %+v, want WriterWaiting", driver.WriterWaitTTL*3/2, te)
	}
	tok := Token()
	var err error
	if !eventually(driver.WriterWaitTTL+s.slack, func() bool {
		_, err = other.AcquireRead(ctx(t), key, tok, s.long)
		return err == nil
	}) {
		t.Fatalf("readers still refused %v after the waiting writer's last try (mark of %v): %v", time.Since(last), driver.WriterWaitTTL, err)
	}
	t.Logf("a reader got in %v after the writer's last try", time.Since(last))
}
