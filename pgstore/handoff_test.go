package pgstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/pgstore"
)

// announcing is a store that says when a waiter has subscribed, so that the
// test releases only once the waiter listens (no sleep).
type announcing struct {
	*pgstore.Store
	subscribed chan struct{}
}

func (a announcing) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	ch, cancel, err := a.Store.Subscribe(ctx, key)
	if err == nil {
		select {
		case a.subscribed <- struct{}{}:
		default:
		}
	}
	return ch, cancel, err
}

// TestHandoffLatency measures, end to end through two dlock Clients on two
// pools, how long after the holder's Release starts the waiting Client's
// Lock returns with the key: release round trip + NOTIFY + the waiter's
// Acquire round trip. The issue asks for the next waiter within 5 ms at the
// median; the bound asserted is looser (a shared machine), the figure is
// logged.
func TestHandoffLatency(t *testing.T) {
	holderStore := newStore(t, newPool(t), pgstore.Options{})
	waiterStore := announcing{newStore(t, newPool(t), pgstore.Options{Table: holderStore.Table()}), make(chan struct{}, 1)}
	holder, err := dlock.New(holderStore, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, holder)
	waiter, err := dlock.New(waiterStore, dlock.WithTTL(time.Minute), dlock.WithWait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, waiter)
	const n = 40
	lat := make([]time.Duration, 0, n)
	for i := range n {
		l, err := holder.Lock(ctx(t), "k")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *dlock.Lease, 1)
		go func() {
			wl, err := waiter.Lock(ctx(t), "k")
			if err != nil {
				t.Errorf("round %d: waiter: %v", i, err)
			}
			got <- wl
		}()
		select {
		case <-waiterStore.subscribed:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the waiter never subscribed", i)
		}
		start := time.Now()
		if err := l.Release(ctx(t)); err != nil {
			t.Fatal(err)
		}
		wl := <-got
		lat = append(lat, time.Since(start))
		if wl == nil {
			t.FailNow()
		}
		if err := wl.Release(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(lat)
	p50, p99 := lat[n/2], lat[n*99/100]
	t.Logf("release start to the waiting Client holding the key, %d rounds: p50 %v, p99 %v, max %v", n, p50, p99, lat[n-1])
	if p50 > 50*time.Millisecond {
		t.Fatalf("median handoff %v; want well under 50ms (the issue asks 5ms)", p50)
	}
}
