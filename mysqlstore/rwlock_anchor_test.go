package mysqlstore_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// Tests of the read-write lock's tables; its rules themselves are checked
// by the conformance suite (TestConformanceLease/RWMutex/...).

// TestRWAnchorSerializesAcquirers: 4 writers and 4 readers on 4 pools race
// for a fresh key, each pausing 20 ms between its read of the holdings and
// its write. The lock on the key's anchor row admits one writer alone or
// readers alone in every round, with no deadlock. Control: without the
// anchor's lock a writer is admitted beside others (each sees the key free
// before the others insert), so the race is real and the count would see
// it.
func TestRWAnchorSerializesAcquirers(t *testing.T) {
	for _, c := range []struct {
		name   string
		anchor bool
	}{{"WithAnchor", true}, {"ControlWithoutAnchor", false}} {
		t.Run(c.name, func(t *testing.T) {
			stores := permitStores(t, 4, func(s *mysqlstore.Store) { mysqlstore.WithRWRace(s, c.anchor) })
			overlaps := 0
			for round := range 3 {
				w, r := rwRaceRound(t, stores, "k"+string(rune('a'+round)))
				t.Logf("round %d: %d writers and %d readers admitted", round, w, r)
				if w > 1 || (w == 1 && r > 0) {
					overlaps++
				}
			}
			switch {
			case c.anchor && overlaps != 0:
				t.Fatalf("%d of 3 rounds admitted a writer beside another holder", overlaps)
			case !c.anchor && overlaps == 0:
				t.Fatal("control: without the anchor no round admitted a writer beside another holder (the race did not happen)")
			}
			var deadlocks int64
			for _, s := range stores {
				deadlocks += s.Deadlocks()
			}
			if deadlocks != 0 {
				t.Errorf("%d deadlocks (retried), want 0", deadlocks)
			}
		})
	}
}

// rwRaceRound starts 4 writers and 4 readers of key at once on stores and
// returns how many of each were admitted.
func rwRaceRound(t *testing.T, stores []*mysqlstore.Store, key string) (writers, readers int) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		start = make(chan struct{})
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s := stores[i%len(stores)]
			acquire, count := s.AcquireRead, &readers
			if i%2 == 0 {
				acquire, count = s.AcquireWrite, &writers
			}
			_, err := acquire(ctxT(t), key, testToken(i), time.Minute)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				*count++
			case !errors.Is(err, driver.ErrNotAcquired):
				t.Errorf("acquire: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	return writers, readers
}

// TestRWRefusedWriterKeepsLaterReadersOut: a writer refused by a reader
// leaves the mark on the key's anchor row, so a fresh reader is refused
// (WriterWaiting) while the first reader may still re-enter. Control: a
// store whose refused writer leaves no mark admits the fresh reader.
func TestRWRefusedWriterKeepsLaterReadersOut(t *testing.T) {
	for _, c := range []struct {
		name string
		mark bool
	}{{"WithMark", true}, {"ControlWithoutMark", false}} {
		t.Run(c.name, func(t *testing.T) {
			s := permitStores(t, 1, func(s *mysqlstore.Store) {
				if !c.mark {
					mysqlstore.WithoutRWMark(s)
				}
			})[0]
			if _, err := s.AcquireRead(ctxT(t), "k", "reader", time.Minute); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AcquireWrite(ctxT(t), "k", "writer", time.Minute); !errors.Is(err, driver.ErrNotAcquired) {
				t.Fatalf("AcquireWrite beside a reader: %v, want ErrNotAcquired", err)
			}
			if _, err := s.AcquireRead(ctxT(t), "k", "reader", time.Minute); err != nil {
				t.Fatalf("re-entry of the reader: %v", err)
			}
			_, err := s.AcquireRead(ctxT(t), "k", "late", time.Minute)
			var te *driver.RWTakenError
			switch refused := errors.As(err, &te) && te.WriterWaiting; {
			case c.mark && !refused:
				t.Fatalf("a reader after the refused writer: %v, want *RWTakenError with WriterWaiting", err)
			case !c.mark && err != nil:
				t.Fatalf("control: a reader with no mark on the key: %v, want admitted", err)
			}
		})
	}
}
