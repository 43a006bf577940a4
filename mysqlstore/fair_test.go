package mysqlstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/overlap"
	"example.com/dlock/mysqlstore"
)

// fairRun runs two Clients, each on its own Store and pool (two local
// queues: two "processes"), g goroutines each, taking one key for d or
// until 20000 sections; it returns each Client's sections and the
// overlapping holdings. mark false runs both stores without the waiter
// mark.
func fairRun(t *testing.T, mark bool, g int, d time.Duration) (counts [2]int, overlaps []string) {
	t.Helper()
	_, opts := migrated(t, mysqlstore.Options{})
	var clients [2]*dlock.Client
	for i := range clients {
		s, err := mysqlstore.New(openDB(t, shared(t).DSN()), opts)
		if err != nil {
			t.Fatal(err)
		}
		if !mark {
			mysqlstore.WithoutMark(s)
		}
		clients[i] = client(t, s)
	}
	var rec overlap.Recorder
	var mu sync.Mutex
	total := 0
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2*g)
	for i, c := range clients {
		who := [2]string{"a", "b"}[i]
		for range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					l, err := c.Lock(ctx, "fair", dlock.WithWait(d))
					if err != nil {
						if ctx.Err() == nil {
							errs <- err
						}
						return
					}
					w := overlap.Window{Who: who, From: time.Now(), Fence: l.Fence()}
					mu.Lock()
					counts[i]++
					total++
					if total >= 20000 {
						cancel()
					}
					mu.Unlock()
					w.To = time.Now()
					rec.Add(w)
					if err := l.Release(context.Background()); err != nil && !errors.Is(err, dlock.ErrNotHeld) {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Lock/Release: %v", err)
	}
	return counts, rec.Overlaps()
}

// TestMarkSharesTheKeyBetweenProcesses: two Clients (two local queues, as
// two processes) of 8 goroutines each on one key for 2.5 s: each gets at
// least a quarter of the sections, and no two holdings overlap. Without
// the mark (the control, logged) one Client's local hand-overs starved
// the other in the bench (min share 0 of ~280); here the control is a
// comparison, not an assertion: on this loaded machine it does not starve
// reliably (see the report in docs/mysql.md).
func TestMarkSharesTheKeyBetweenProcesses(t *testing.T) {
	const g, d = 8, 2500 * time.Millisecond
	counts, overlaps := fairRun(t, true, g, d)
	sum := counts[0] + counts[1]
	t.Logf("with the mark: sections %v (min share %.2f)", counts, float64(min(counts[0], counts[1]))/float64(max(sum, 1)))
	for _, o := range overlaps {
		t.Error(o)
	}
	if sum < 40 {
		t.Fatalf("only %d sections in %v", sum, d)
	}
	if 4*min(counts[0], counts[1]) < sum {
		t.Errorf("unfair: sections %v, want each at least a quarter of %d", counts, sum)
	}
	t.Run("control without the mark", func(t *testing.T) {
		counts, overlaps := fairRun(t, false, g, d)
		sum := counts[0] + counts[1]
		t.Logf("without the mark: sections %v (min share %.2f)", counts, float64(min(counts[0], counts[1]))/float64(max(sum, 1)))
		for _, o := range overlaps {
			t.Error(o)
		}
	})
}
