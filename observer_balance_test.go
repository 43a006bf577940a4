package dlock_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// TestObserverEndsOnlyReportedGrants: every holding the Observer hears the
// end of (released, handed off, lost) was reported granted first. Waiters
// give up at the very instant the holder releases, so that some are handed
// the key as they give up (that lease then passes on unseen). Counted over
// many rounds.
func TestObserverEndsOnlyReportedGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		c, err := dlock.New(memstore.New(nil), dlock.WithObserver(rec))
		if err != nil {
			t.Fatal(err)
		}
		const hold = 10 * time.Millisecond
		for range 100 {
			ctx := context.Background()
			l, err := c.Lock(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() {
					wctx, cancel := context.WithTimeout(ctx, hold)
					defer cancel()
					if w, err := c.Lock(wctx, "k"); err == nil {
						_ = w.Release(ctx)
					}
				})
			}
			time.Sleep(hold)
			_ = l.Release(ctx)
			wg.Wait()
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		granted, ended := 0, 0
		for _, e := range rec.take() {
			switch {
			case e.Type == dlock.EventWaitEnd && e.Outcome == dlock.OutcomeAcquired:
				granted++
			case e.Type == dlock.EventReleased, e.Type == dlock.EventHandedOff, e.Type == dlock.EventLost:
				ended++
			}
		}
		if ended != granted {
			t.Fatalf("%d holdings ended, %d granted: an end was reported for a holding whose grant was not", ended, granted)
		}
	})
}
