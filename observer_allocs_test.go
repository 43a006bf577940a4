package dlock_test

import (
	"context"
	"log/slog"
	"testing"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// lockReleaseAllocs is what an uncontended Lock and Release on memstore
// allocate, through c.
func lockReleaseAllocs(t *testing.T, c *dlock.Client) float64 {
	ctx := context.Background()
	return testing.AllocsPerRun(200, func() {
		l, err := c.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// lockReleaseAllocsBefore is what Lock and Release allocated before
// observers existed (BenchmarkLockRelease: 5 allocs/op).
const lockReleaseAllocsBefore = 5

// Without an Observer, the hot path allocates what it did before
// observers existed: nothing more. Control: with one (logging nothing),
// the same count sees the holding's watch (one allocation).
func TestNoObserverAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	c := newClientOn(t, memstore.New(nil))
	if n := lockReleaseAllocs(t, c); n > lockReleaseAllocsBefore {
		t.Fatalf("Lock+Release without an Observer: %v allocations, want at most %d", n, lockReleaseAllocsBefore)
	}
	quiet := newClientOn(t, memstore.New(nil), dlock.WithObserver(dlock.SlogObserver(slog.New(slog.DiscardHandler))))
	if n := lockReleaseAllocs(t, quiet); n <= lockReleaseAllocsBefore {
		t.Fatalf("control: Lock+Release with an Observer: %v allocations, want more than %d", n, lockReleaseAllocsBefore)
	} else {
		t.Logf("Lock+Release with an Observer that logs nothing: %v allocations", n)
	}
}
