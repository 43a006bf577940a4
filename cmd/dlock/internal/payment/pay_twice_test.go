package payment

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/cmd/dlock/internal/inventory"
)

// The scenario end to end on the embedded server, by strategy, with the
// provider's exact counts: without the guard a double click, or a retry
// after the instance died, charges every order twice; with the guard
// once; with the executor killed after its charge, still once (two
// attempts, one charge, a takeover per order); keyed by the fence instead
// of the derived key (the negative control), twice.
func TestPayTwiceChargesByStrategy(t *testing.T) {
	srv, err := inventory.StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const orders = 8
	// A lease of 1 s, not the demo's 300 ms: the exact takeover count needs
	// the dying instance to keep its lease until it is killed, which a
	// loaded machine can delay by more than a 300 ms lease allows.
	cfg := Config{RedisAddr: srv.Addr(), Orders: orders, Instances: 2, Lease: time.Second, Latency: DefaultLatency}
	rs, err := Run(ctx, cfg, Strategies)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		attempts, charges, takeovers int
		kind                         string
	}{
		NoGuard:       {2 * orders, 2 * orders, 0, KindDoubleCharged},
		NoGuardRetry:  {2 * orders, 2 * orders, 0, KindDoubleCharged},
		Guarded:       {orders, orders, 0, KindCorrect},
		GuardCrash:    {2 * orders, orders, orders, KindCorrect},
		GuardFenceKey: {2 * orders, 2 * orders, orders, KindDoubleCharged},
	}
	if len(rs) != len(Strategies) {
		t.Fatalf("%d results, want %d", len(rs), len(Strategies))
	}
	for _, r := range rs {
		w := want[r.Strategy]
		t.Logf("%+v", r)
		if r.Orders != orders || r.ChargeAttempts != w.attempts || r.Charges != w.charges || r.Takeovers != w.takeovers ||
			r.Kind != w.kind || r.Errors != 0 || r.Uncharged != 0 || r.Duplicates != w.charges-orders {
			t.Errorf("%s: %d attempts, %d charges (%d duplicates), %d takeovers, %d errors, %s; want %d, %d, %d, 0 errors, %s",
				r.Strategy, r.ChargeAttempts, r.Charges, r.Duplicates, r.Takeovers, r.Errors, r.Kind, w.attempts, w.charges, w.takeovers, w.kind)
		}
	}
	// Every order's clicks got the payment's answer: the guarded second
	// click as a 409 then the replay, or the replay at once.
	if g := rs[2]; g.Replays != orders || g.Requests != 2*orders+g.Conflicts {
		t.Errorf("guard: %d replays, %d requests, %d 409s; want %d replays and one request per click and 409", g.Replays, g.Requests, g.Conflicts, orders)
	}
	// The crash: each order's first request dropped, then answered by the
	// survivor after the lease (409s while it runs).
	if c := rs[3]; c.Dropped != orders || c.Replays != 0 {
		t.Errorf("guard-crash: %d dropped, %d replays; want %d dropped, 0 replays", c.Dropped, c.Replays, orders)
	}
}
