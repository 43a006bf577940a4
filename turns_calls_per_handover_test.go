package dlock_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// ownNotifier is a store as another process sees it: the same locks, but
// a release notification of its own (a notifier no other Client shares).
type ownNotifier struct{ unwrapStore }

func (o *ownNotifier) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return o.faultStore.Mutex.(driver.Notifier).Subscribe(ctx, key)
}

// ownStore is a store that cannot notify, as another process sees it.
type ownStore struct{ *faultStore }

// TestReleaseWakesOneWaiterPerProcess counts the store calls (Acquire and
// Release) per hand-over when n waiters, each a Client of its own, wait for
// one key. On a store that notifies, in one process, a release wakes the
// first waiter only: a hand-over costs its release, one acquire and the
// next waiter's contended attempt (exactly), and every waiter is granted
// in the order it queued. Control: the same waiters each on a notifier of
// its own (n processes) are each woken by every release, about half of
// them per hand-over. On a store that cannot notify, in one process, only
// the first waiter polls: with critical sections as long as the backoff's
// cap, a hand-over costs its release, the acquire and the first's polls
// meanwhile (about 8, whatever n); control: n processes poll each, about
// one poll per waiter per hand-over. The bubble's clock makes the counts
// independent of load (no lease expires: a minute's TTL).
func TestReleaseWakesOneWaiterPerProcess(t *testing.T) {
	const n = 40
	const hold = 250 * time.Millisecond // the backoff's cap: each poller polls about once per hand-over
	// The holder's release, then each waiter's acquire and release, and the
	// contended attempt of the next one but the last, woken to meet the
	// holding (see turns.go).
	const one = float64(1+2*n+n-1) / n
	for _, tc := range []struct {
		name     string
		view     func(*faultStore) driver.Mutex
		hold     time.Duration // each waiter's critical section
		min, max float64       // calls per hand-over
	}{
		{"one process", func(fs *faultStore) driver.Mutex { return unwrapStore{fs} }, time.Millisecond, one, one},
		{"a process per waiter (control)", func(fs *faultStore) driver.Mutex { return &ownNotifier{unwrapStore{fs}} }, time.Millisecond, n / 4, n},
		{"polling, one process", func(fs *faultStore) driver.Mutex { return fs }, hold, 2, 10},
		{"polling, a process per waiter (control)", func(fs *faultStore) driver.Mutex { return &ownStore{fs} }, hold, n / 2, 2 * n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				per, order := handOvers(t, n, tc.hold, tc.view)
				t.Logf("%d waiters: %.1f store calls per hand-over", n, per)
				if per < tc.min || per > tc.max {
					t.Fatalf("%v store calls per hand-over, want %v to %v", per, tc.min, tc.max)
				}
				if tc.max == one {
					for i, w := range order {
						if w != i {
							t.Fatalf("grant order %v, want the order the waiters queued in", order)
						}
					}
				}
			})
		})
	}
}

// handOvers queues n waiters (each a Client on view(fs)) one after the
// other behind a holder, releases, and returns the store calls per
// hand-over and the order the waiters were granted in.
func handOvers(t *testing.T, n int, hold time.Duration, view func(*faultStore) driver.Mutex) (float64, []int) {
	fs := &faultStore{Mutex: memstore.New(nil)}
	ctx := testCtx(t)
	holder := newClientOn(t, view(fs))
	l := mustLock(t, holder, ctx, "k", dlock.WithTTL(time.Minute))
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		c := newClientOn(t, view(fs))
		wg.Go(func() {
			lw, err := c.Lock(ctx, "k", dlock.WithTTL(time.Minute))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(hold) // the critical section (the bubble's clock)
			_ = lw.Release(ctx)
		})
		synctest.Wait() // waiter i has subscribed and sleeps
	}
	before := fs.calls.Load()
	release(t, l)
	wg.Wait()
	return float64(fs.calls.Load()-before) / float64(n), order
}
