package faulttest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/memstore"
)

// TestVerdict: a clean run passes; a lost update, an oversell or an empty
// run fails a safe run; the negative control fails when it shows nothing.
func TestVerdict(t *testing.T) {
	s := faulttest.Stock{Initial: 10}
	for _, tc := range []struct {
		final, sold    int
		safe           bool
		lost, oversold int
		fails          string
	}{
		{final: 4, sold: 6, safe: true},
		{final: 0, sold: 10, safe: true},
		{final: 5, sold: 6, safe: true, lost: 1, fails: "1 lost updates"},
		{final: -1, sold: 11, safe: true, oversold: 2, fails: "0 lost updates, 2 oversold"},
		{final: 0, sold: 12, safe: true, lost: 2, oversold: 2, fails: "2 lost updates, 2 oversold"},
		{final: 10, sold: 0, safe: true, fails: "nothing sold"},
		{final: 4, sold: 6, safe: false, fails: "negative control"},
		{final: 5, sold: 6, safe: false, lost: 1},
	} {
		lost, oversold, err := s.Verdict(tc.final, tc.sold, tc.safe)
		if lost != tc.lost || oversold != tc.oversold {
			t.Errorf("%+v: lost %d, oversold %d", tc, lost, oversold)
		}
		if (err == nil) != (tc.fails == "") || err != nil && !strings.Contains(err.Error(), tc.fails) {
			t.Errorf("%+v: %v", tc, err)
		}
	}
}

// TestBuy: every request of every worker is made once, under its own
// name, and counted by its outcome; ErrStale (wrapped too) is counted
// apart and the first error kept on one line.
func TestBuy(t *testing.T) {
	s := faulttest.Stock{Workers: 3, Rounds: 4}
	var mu sync.Mutex
	seen := map[string]bool{}
	var n atomic.Int64
	buy := func(ctx context.Context, b string) (bool, error) {
		if _, ok := ctx.Deadline(); !ok {
			return false, errors.New("no deadline")
		}
		mu.Lock()
		dup := seen[b]
		seen[b] = true
		mu.Unlock()
		if dup {
			return false, errors.New("twice: " + b)
		}
		switch n.Add(1) % 4 {
		case 0:
			return false, fmt.Errorf("write:\n%w", faulttest.ErrStale)
		case 1:
			return false, nil
		}
		return true, nil
	}
	var res faulttest.StockResult
	if err := s.Buy(context.Background(), "p", buy, &res); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 12 || !seen["p-2-3"] {
		t.Fatalf("buyers %v", seen)
	}
	if res.Sold.Load() != 6 || res.Out.Load() != 3 || res.Errs.Load() != 3 || res.Stale.Load() != 3 {
		t.Fatalf("counts: %s", &res)
	}
	if got := res.String(); !strings.Contains(got, "first: write: | stale fence") {
		t.Fatalf("String() = %q", got)
	}
}

// faulter records the faults made.
type faulter struct {
	mu     sync.Mutex
	events []string
}

func (f *faulter) add(e string) { f.mu.Lock(); f.events = append(f.events, e); f.mu.Unlock() }

func (f *faulter) Hold(d faultproxy.Direction) func() {
	f.add("hold")
	return func() { f.add("release") }
}

func (f *faulter) ResetAll() { f.add("reset") }

// TestInject: Max faults, each hold released, both kinds made; the same
// seed makes the same faults; stop ends it early with the count made.
func TestInject(t *testing.T) {
	plan := faulttest.FaultPlan{Max: 12, Gap: time.Millisecond, GapSpread: 3 * time.Millisecond, Hold: time.Millisecond, HoldSpread: 2 * time.Millisecond}
	run := func(seed uint64) []string {
		var f faulter
		if n := plan.Inject(&f, seed, make(chan struct{})); n != plan.Max {
			t.Fatalf("made %d faults, want %d", n, plan.Max)
		}
		return f.events
	}
	a, b := run(7), run(7)
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("seed 7 twice: %v, %v", a, b)
	}
	holds, resets := strings.Count(strings.Join(a, ","), "hold"), strings.Count(strings.Join(a, ","), "reset")
	if holds+resets != plan.Max || holds == 0 || resets == 0 || strings.Count(strings.Join(a, ","), "release") != holds {
		t.Fatalf("faults %v", a)
	}
	stop := make(chan struct{})
	close(stop)
	var f faulter
	if n := plan.Inject(&f, 7, stop); n != 0 || len(f.events) != 0 {
		t.Fatalf("stopped: %d faults, %v", n, f.events)
	}
}

// TestLockBuyer: each sale runs holding the key's lease (never two at
// once, each with its own fence); the lease is released after; the closer
// closes the store.
func TestLockBuyer(t *testing.T) {
	var inside atomic.Int32
	fences := map[uint64]bool{}
	var mu sync.Mutex
	closed := false
	buy, closeFn, err := faulttest.LockBuyer(memstore.New(nil), func(context.Context) { closed = true }, "k",
		func(ctx context.Context, l *dlock.Lease, b string) (bool, error) {
			if inside.Add(1) != 1 {
				return false, errors.New("two buyers inside")
			}
			defer inside.Add(-1)
			mu.Lock()
			dup := fences[l.Fence()]
			fences[l.Fence()] = true
			mu.Unlock()
			if dup {
				return false, fmt.Errorf("fence %d twice", l.Fence())
			}
			time.Sleep(time.Millisecond) // the critical section's work
			return true, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	var res faulttest.StockResult
	if err := (faulttest.Stock{Workers: 4, Rounds: 5}).Buy(context.Background(), "p", buy, &res); err != nil {
		t.Fatal(err)
	}
	closeFn()
	if res.Sold.Load() != 20 || res.Errs.Load() != 0 || !closed {
		t.Fatalf("%s; store closed %v", &res, closed)
	}
}

// TestRetry: a failing request is retried until it succeeds, at most the
// attempts given, and not after ctx ended.
func TestRetry(t *testing.T) {
	calls := 0
	flaky := func(fails int) faulttest.BuyFunc {
		calls = 0
		return func(context.Context, string) (bool, error) {
			if calls++; calls <= fails {
				return false, errors.New("reset")
			}
			return true, nil
		}
	}
	if ok, err := faulttest.Retry(5, flaky(2))(context.Background(), "b"); !ok || err != nil || calls != 3 {
		t.Fatalf("2 failures: %v %v after %d calls", ok, err, calls)
	}
	if ok, err := faulttest.Retry(5, flaky(9))(context.Background(), "b"); ok || err == nil || calls != 5 {
		t.Fatalf("9 failures: %v %v after %d calls, want 5", ok, err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := faulttest.Retry(5, flaky(9))(ctx, "b"); err == nil || calls != 1 {
		t.Fatalf("ended ctx: %v after %d calls, want 1", err, calls)
	}
}
