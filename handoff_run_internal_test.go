package dlock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// shiftClock stands still but for the shifts a test makes: timers are real,
// Now moves only by advance, so a test can make a run of handoffs look long,
// and a slow machine cannot (a real clock ended runs of handoffs at the 5 ms
// bound under -race on a loaded machine). Leases here last a minute, on
// real timers.
type shiftClock struct {
	mu    sync.Mutex
	shift time.Duration
}

var shiftClockEpoch = time.Unix(1_000_000, 0)

func (c *shiftClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return shiftClockEpoch.Add(c.shift)
}

func (c *shiftClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

func (c *shiftClock) advance(d time.Duration) {
	c.mu.Lock()
	c.shift += d
	c.mu.Unlock()
}

// notifyingMini is a miniStore that can announce releases (it never
// does: the chains below hand over locally), so that its runs of handoffs
// have the bounds of a store with notifications.
type notifyingMini struct{ *miniStore }

func (notifyingMini) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return make(chan struct{}), func() {}, nil
}

// handoffChain queues n waiters behind a holder, then releases each lease
// as it arrives, calling between(i) before the i-th release (the holder's is
// 0). Each transfer takes the time takes on clk. It returns, for each
// release, whether it was a handoff (a transfer). The store announces
// releases (notifyingMini); handoffChainOn takes the store.
func handoffChain(t *testing.T, n int, clk *shiftClock, takes time.Duration, between func(i int)) []bool {
	t.Helper()
	st := newMiniStore()
	return handoffChainOn(t, notifyingMini{st}, st, n, clk, takes, between)
}

func handoffChainOn(t *testing.T, store driver.Mutex, st *miniStore, n int, clk *shiftClock, takes time.Duration, between func(i int)) []bool {
	t.Helper()
	var transfers atomic.Int64
	st.onTransfer = func() { transfers.Add(1); clk.advance(takes) }
	c, err := New(store, WithTTL(time.Minute), WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan lockResult, n)
	for range n {
		go func() {
			l, err := c.Lock(ctx, "k")
			got <- lockResult{l, err}
		}()
	}
	waitQueued(t, c, "k", n)
	handed := make([]bool, 0, n+1)
	for i := 0; ; i++ {
		between(i)
		before := transfers.Load()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		handed = append(handed, transfers.Load() > before)
		if i == n {
			return handed
		}
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		l = r.l
	}
}

// A run of handoffs ends after maxHandoffs: that release goes to the store,
// so that other processes get a turn, and a new run starts after it.
func TestHandoffRunEndsAtTheCount(t *testing.T) {
	handed := handoffChain(t, maxHandoffs+5, &shiftClock{}, 0, func(int) {})
	for i, h := range handed {
		want := i != maxHandoffs && i != len(handed)-1 // the capped release, and the last (nobody waits)
		if h != want {
			t.Fatalf("release %d: handoff %v, want %v (handoffs %v)", i, h, want, handed)
		}
	}
}

// A run of handoffs also ends once it has lasted maxHandoffRun, however few
// handoffs it made: long critical sections do not keep other processes
// waiting for maxHandoffs of them.
func TestHandoffRunEndsAtTheTimeBound(t *testing.T) {
	clk := &shiftClock{}
	handed := handoffChain(t, 4, clk, 0, func(i int) {
		if i == 2 {
			clk.advance(maxHandoffRun) // the second holding of the run is long
		}
	})
	want := []bool{true, true, false, true, false}
	for i := range want {
		if handed[i] != want[i] {
			t.Fatalf("handoffs %v, want %v", handed, want)
		}
	}
}

// On a store whose handoff is slow (a millisecond on etcd, against Redis's
// tenth), a run may last handoffRunCalls handoffs' time, longer than
// maxHandoffRun, so that a run pays for its end; past that it ends too.
func TestHandoffRunTimeBoundGrowsWithSlowHandoffs(t *testing.T) {
	clk := &shiftClock{}
	handed := handoffChain(t, 5, clk, time.Millisecond, func(i int) {
		switch i {
		case 2:
			clk.advance(maxHandoffRun) // 7 ms into the run: past maxHandoffRun, within 16 x 1 ms
		case 3:
			clk.advance(10 * time.Millisecond) // 18 ms: past the grown bound
		}
	})
	want := []bool{true, true, true, false, true, false}
	for i := range want {
		if handed[i] != want[i] {
			t.Fatalf("handoffs %v, want %v", handed, want)
		}
	}
}

// However slow one handoff was (a loaded machine), the grown time bound
// stops at maxHandoffRunGrown.
func TestHandoffRunGrownBoundIsCapped(t *testing.T) {
	clk := &shiftClock{}
	handed := handoffChain(t, 4, clk, 10*time.Millisecond, func(i int) {
		if i == 2 {
			clk.advance(maxHandoffRunGrown - 20*time.Millisecond) // 10 + 10 + this = the cap, not 16 x 10 ms
		}
	})
	want := []bool{true, true, false, true, false}
	for i := range want {
		if handed[i] != want[i] {
			t.Fatalf("handoffs %v, want %v", handed, want)
		}
	}
}

// On a store without release notifications or a queue (the MariaDB lease
// table), another process's waiter only polls, so a run lasts at least
// maxHandoffRunPolled: past maxHandoffRun it goes on, past the polled
// bound it ends. The control: the same chain on a store that notifies ends
// at maxHandoffRun.
func TestHandoffRunOnAPolledStoreLastsLonger(t *testing.T) {
	chain := func(notify bool) []bool {
		clk := &shiftClock{}
		st := newMiniStore()
		var store driver.Mutex = st
		if notify {
			store = notifyingMini{st}
		}
		return handoffChainOn(t, store, st, 5, clk, 0, func(i int) {
			switch i {
			case 2:
				clk.advance(maxHandoffRun) // past the notifying bound
			case 3:
				clk.advance(maxHandoffRunPolled - maxHandoffRun) // at the polled bound
			}
		})
	}
	for _, c := range []struct {
		notify bool
		want   []bool
	}{
		{false, []bool{true, true, true, false, true, false}},
		{true, []bool{true, true, false, true, true, false}},
	} {
		got := chain(c.notify)
		for i := range c.want {
			if got[i] != c.want[i] {
				t.Fatalf("notify %v: handoffs %v, want %v", c.notify, got, c.want)
			}
		}
	}
}
