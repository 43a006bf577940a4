package dlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// readerStream starts a reader every hold/2 until end (each waits in
// RLock, holds hold, releases) and a writer at start, and returns when the
// writer got in (zero if not before end), and how many readers got in
// between the writer's start and its entry.
func readerStream(t *testing.T, f *rwFault, notify bool, hold, start, end time.Duration) (in time.Duration, after int) {
	synctest.Test(t, func(t *testing.T) {
		l := newRWLocks(t, rwStore(f, notify))
		t0 := time.Now()
		var mu sync.Mutex
		var writerIn time.Duration
		var wg sync.WaitGroup
		for at := time.Duration(0); at < end; at += hold / 2 {
			wg.Go(func() {
				time.Sleep(at)
				h, err := l.RLock(context.Background(), "k")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if now := time.Since(t0); now > start && writerIn == 0 {
					after++
				}
				mu.Unlock()
				time.Sleep(hold)
				_ = h.Release(context.Background())
			})
		}
		wg.Go(func() {
			time.Sleep(start)
			h, err := l.Lock(context.Background(), "k")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			writerIn = time.Since(t0)
			mu.Unlock()
			time.Sleep(hold)
			_ = h.Release(context.Background())
		})
		wg.Wait()
		if writerIn < end {
			in = writerIn
		}
	})
	return in, after
}

// Writer preference: with an endless stream of overlapping readers (a new
// one every half hold time), a writer gets in within one reader hold time
// after the readers ahead of it leave, and no reader that came after it
// gets in before it. Control: a store whose refused writer leaves no mark
// starves the writer for the whole stream.
func TestRWWriterNotStarvedByOverlappingReaders(t *testing.T) {
	const hold, start, end = 400 * time.Millisecond, 1100 * time.Millisecond, 6 * time.Second
	// Readers start every 200 ms: those ahead of the writer started at
	// 1000 ms at the latest and leave by 1400 ms.
	const aheadLeave = start - 100*time.Millisecond + hold
	for _, notify := range []bool{true, false} {
		in, after := readerStream(t, newRWFault(), notify, hold, start, end)
		if in == 0 || in > aheadLeave+hold {
			t.Errorf("notify=%v: writer in at %v, want by %v (the readers ahead leave at %v, plus one hold time)", notify, in, aheadLeave+hold, aheadLeave)
		}
		if after != 0 {
			t.Errorf("notify=%v: %d readers that came after the writer got in before it", notify, after)
		}
		t.Logf("notify=%v: writer started at %v, in at %v", notify, start, in)
	}
	f := newRWFault()
	f.noMark = true
	if in, _ := readerStream(t, f, true, hold, start, end); in != 0 {
		t.Errorf("control: with no writer-waiting mark the writer got in at %v during the stream; the test cannot see starvation", in)
	}
}

// A writer waiting longer than driver.WriterWaitTTL behind a reader (its
// lease renewed, its release an hour away in backoff terms) keeps its mark
// live: readers that arrive after it are refused for the whole wait, and
// it gets in at the reader's release. Control: a writer that pauses longer
// than the mark lasts (the retry bound raised to an hour) lets a later
// reader in.
func TestRWWaitingWriterKeepsItsMark(t *testing.T) {
	for _, control := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			if control {
				defer dlock.SetWriterRetry(time.Hour)()
			}
			f := newRWFault()
			l := newRWLocks(t, rwStore(f, true), dlock.WithBackoff(func(int) time.Duration { return time.Hour }))
			reader := mustTry(t, l, "k", driver.RWRead)
			got := make(chan *dlock.RWHolding)
			go func() {
				h, err := l.Lock(context.Background(), "k")
				if err != nil {
					t.Error(err)
				}
				got <- h
			}()
			var joined int
			for range 10 { // 10 s, five times the mark's life
				time.Sleep(time.Second)
				if h, err := l.TryRLock(context.Background(), "k"); err == nil {
					joined++
					_ = h.Release(context.Background())
				}
			}
			_ = reader.Release(context.Background())
			released := time.Now()
			w := <-got
			if control {
				if joined == 0 {
					t.Error("control: a writer pausing an hour kept readers out; the test cannot see a lapsed mark")
				}
			} else if joined != 0 || time.Since(released) != 0 {
				t.Errorf("%d later readers joined during the writer's wait, writer in %v after the release; want none, at once", joined, time.Since(released))
			}
			_ = w.Release(context.Background())
		})
	}
}

// downgradeSchedule is CURATOR-621's: a writer holds key, a second writer
// queues, the first downgrades to read. It reports whether the second
// writer got in while the downgraded holding still held, and checks the
// rest: fence kept, later readers refused, the second writer in at the
// release, with a greater fence.
func downgradeSchedule(t *testing.T, f *rwFault) (overlap bool) {
	synctest.Test(t, func(t *testing.T) {
		l := newRWLocks(t, rwStore(f, true), dlock.WithTTL(time.Hour))
		w := mustTry(t, l, "k", driver.RWWrite)
		fence := w.Fence()
		var mu sync.Mutex
		released := false
		got := make(chan *dlock.RWHolding)
		go func() {
			h, err := l.Lock(context.Background(), "k")
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			overlap = !released
			mu.Unlock()
			got <- h
		}()
		synctest.Wait()
		if err := w.Downgrade(context.Background()); err != nil {
			t.Fatal(err)
		}
		if w.Mode() != driver.RWRead || w.Fence() != fence {
			t.Errorf("after Downgrade: mode %v, fence %d; want read, %d", w.Mode(), w.Fence(), fence)
		}
		time.Sleep(5 * time.Second)
		if _, err := l.TryRLock(context.Background(), "k"); !f.endOnDowngrade && !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("a later reader while a writer waits: %v, want ErrNotAcquired", err)
		}
		mu.Lock()
		released = true
		mu.Unlock()
		_ = w.Release(context.Background())
		w2 := <-got
		if w2 != nil && w2.Fence() <= fence {
			t.Errorf("second writer's fence %d, want above the first's %d", w2.Fence(), fence)
		}
	})
	return overlap
}

// A downgrade keeps a queued writer out until the downgraded reader
// leaves (CURATOR-621). Control: a store whose downgrade ends the holding
// lets the queued writer in while the downgraded reader believes it holds.
func TestRWDowngradeKeepsQueuedWriterOut(t *testing.T) {
	if downgradeSchedule(t, newRWFault()) {
		t.Error("the queued writer got in while the downgraded holding held")
	}
	f := newRWFault()
	f.endOnDowngrade = true
	if !downgradeSchedule(t, f) {
		t.Error("control: a downgrade that ends the holding did not let the writer in; the test cannot see it")
	}
}

// A write asked for through a context that holds a read of the key (RDo's)
// fails at once with ErrUpgrade (and ErrInvalid), without I/O and without
// waiting; a nested read of the key, and under Do any acquisition of it,
// fails with ErrInvalid. Control: the same Lock through a context that
// holds nothing waits (ends by its wait bound with ErrNotAcquired), and a
// write of another key works.
func TestRWUpgradeRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRWFault()
		l := newRWLocks(t, f)
		ctx := context.Background()
		err := l.RDo(ctx, "k", func(fctx context.Context) error {
			calls, t0 := f.calls.Load(), time.Now()
			_, err := l.Lock(fctx, "k")
			if !errors.Is(err, dlock.ErrUpgrade) || !errors.Is(err, dlock.ErrInvalid) {
				t.Errorf("Lock under RDo: %v, want ErrUpgrade", err)
			}
			if err := l.Do(fctx, "k", func(context.Context) error { return nil }); !errors.Is(err, dlock.ErrUpgrade) {
				t.Errorf("Do under RDo: %v, want ErrUpgrade", err)
			}
			if _, err := l.TryRLock(fctx, "k"); !errors.Is(err, dlock.ErrInvalid) || errors.Is(err, dlock.ErrUpgrade) {
				t.Errorf("TryRLock under RDo: %v, want ErrInvalid", err)
			}
			if n, d := f.calls.Load()-calls, time.Since(t0); n != 0 || d != 0 {
				t.Errorf("refusals made %d store calls and took %v, want none, at once", n, d)
			}
			if _, err := l.Lock(ctx, "k", dlock.WithWait(time.Second)); !errors.Is(err, dlock.ErrNotAcquired) || errors.Is(err, dlock.ErrUpgrade) {
				t.Errorf("control: Lock without the holding's context: %v, want ErrNotAcquired after a wait", err)
			}
			return l.Do(fctx, "other", func(context.Context) error { return nil })
		})
		if err != nil {
			t.Fatal(err)
		}
		err = l.Do(ctx, "k", func(fctx context.Context) error {
			for name, try := range map[string]func(context.Context, string, ...dlock.Option) (*dlock.RWHolding, error){"TryLock": l.TryLock, "RLock": l.RLock} {
				if _, err := try(fctx, "k"); !errors.Is(err, dlock.ErrInvalid) || errors.Is(err, dlock.ErrUpgrade) {
					t.Errorf("%s under Do: %v, want ErrInvalid (not an upgrade)", name, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		mustTry(t, l, "k", driver.RWWrite) // RDo and Do released their holdings
	})
}

// Downgrade of a write holding the store no longer has (ended behind the
// client's back: here released in the store by its token) loses it with
// ErrLost instead of taking a new read holding under the old fence, and
// the new read holding the store granted is given back; with another
// writer in, it is lost too (ErrTaken). Control: the same Downgrade on a
// holding the store has succeeds.
func TestRWDowngradeOfAnEndedHoldingIsLost(t *testing.T) {
	for _, c := range []struct {
		name        string
		end, writer bool
	}{{"held", false, false}, {"ended", true, false}, {"taken", true, true}} {
		synctest.Test(t, func(t *testing.T) {
			f := newRWFault()
			l := newRWLocks(t, f, dlock.WithTTL(time.Hour))
			w := mustTry(t, l, "k", driver.RWWrite)
			if c.end {
				info, _ := f.Store.InspectRW(context.Background(), "k")
				_ = f.Store.ReleaseRW(context.Background(), "k", info.Holders[0].Token)
			}
			if c.writer {
				mustTry(t, l, "k", driver.RWWrite)
			}
			err := w.Downgrade(context.Background())
			synctest.Wait() // the give-back
			info, _ := f.Store.InspectRW(context.Background(), "k")
			switch {
			case !c.end && (err != nil || info.Mode != driver.RWRead || info.Holders[0].Fence != w.Fence()):
				t.Errorf("control: Downgrade of a held write: %v, store %+v; want nil and a read holding with fence %d", err, info, w.Fence())
			case c.end && !errors.Is(err, dlock.ErrLost):
				t.Errorf("%s: Downgrade: %v, want ErrLost", c.name, err)
			case c.end && !c.writer && len(info.Holders) != 0:
				t.Errorf("%s: %d holdings left in the store, want the new read given back", c.name, len(info.Holders))
			case c.writer && !errors.Is(err, dlock.ErrTaken):
				t.Errorf("%s: Downgrade: %v, want ErrTaken", c.name, err)
			}
		})
	}
}
