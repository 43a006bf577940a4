package zkstore_test

import (
	"testing"
	"time"

	"example.com/dlock/zkstore"
)

// TestWakeupSyncOnlyWhenNeeded pins the wake-up path: a waiter woken while
// its session is certain for at least half its timeout (its create, a
// write, confirmed it moments ago) lists the lock path without a sync; one
// woken after its certainty aged past that sends a sync beside the listing
// (so its grant still counts from a leader-confirmed reply: TTL > 0). The
// second case is the control: the counter does count syncs.
func TestWakeupSyncOnlyWhenNeeded(t *testing.T) {
	e := server(t)
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		hold    time.Duration // how long the waiter waits before the release
		syncs   int64
	}{
		{"fresh", 10 * time.Second, 0, 0},
		{"aged", 2 * time.Second, 900 * time.Millisecond, 1}, // margin 0.5 s: certain for < 1 s after 0.5 s
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := uniq(t)
			h := dial(t, root, tc.timeout, e.Addrs()...)
			w := dial(t, root, tc.timeout, e.Addrs()...)
			ctx := ctxT(t, 20*time.Second)
			ht := tok()
			if _, err := h.Acquire(ctx, "k", ht, 0); err != nil {
				t.Fatal(err)
			}
			type res struct {
				ttl time.Duration
				err error
			}
			got := make(chan res, 1)
			before := zkstore.Syncs(w)
			go func() {
				g, err := w.AcquireQueued(ctx, "k", tok(), 0)
				got <- res{g.TTL, err}
			}()
			waitWaiters(t, w, "k", 1)
			if tc.hold > 0 {
				<-time.After(tc.hold) // let the waiter's session certainty age (elapsed time is the point)
			}
			if err := h.Release(ctx, "k", ht); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.err != nil || r.ttl <= 0 {
				t.Fatalf("waiter's grant: TTL %v, %v; want a positive TTL", r.ttl, r.err)
			}
			if n := zkstore.Syncs(w) - before; n != tc.syncs {
				t.Fatalf("waiter sent %d syncs on its wake-up; want %d", n, tc.syncs)
			}
		})
	}
}
