package ratedemo

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/cmd/dlock/internal/inventory"
)

// The seed's example across two instances of 10 threads each, on the
// embedded server, by strategy: x/time/rate in each instance admits 5 per
// instance, 10 in all; dlock.Limiter admits 5 in all, with the clocks in
// agreement or 2 s apart either way; a fixed window on each instance's
// own clock (the negative control) admits 5 per instance once the clocks
// are skewed. Exact while the burst takes less than one emission interval
// (200 ms); on a machine slow enough to take longer, the shared limiter
// may admit one more per interval, and no more (LimitAllows).
func TestRateLimitDemoAdmitsByStrategy(t *testing.T) {
	srv, err := inventory.StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config{RedisAddr: srv.Addr(), Instances: 2, Threads: DefaultThreads, Skew: DefaultSkew}
	rs, err := Run(ctx, cfg, Strategies)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(Strategies) {
		t.Fatalf("%d results, want %d", len(rs), len(Strategies))
	}
	perInstance := map[string]bool{Local: true, ClientClock: true}
	for _, r := range rs {
		t.Logf("%+v", r)
		if r.Requests != 20 || r.Errors != 0 || r.Admitted+r.Denied != r.Requests {
			t.Errorf("%s: %d requests, %d errors, %d admitted, %d denied; want 20, 0, a sum of 20", r.Strategy, r.Requests, r.Errors, r.Admitted, r.Denied)
			continue
		}
		if perInstance[r.Strategy] { // a budget each: at least 5 each, above the shared limit
			for i, n := range r.PerInstance {
				if n < Rate {
					t.Errorf("%s: instance %d admitted %d, want at least %d", r.Strategy, i+1, n, Rate)
				}
			}
			if r.Admitted < 2*Rate || r.Admitted > r.Allowed && r.Kind != KindOverLimit {
				t.Errorf("%s: %d admitted (%s); want at least %d, judged over the limit", r.Strategy, r.Admitted, r.Kind, 2*Rate)
			}
			continue
		}
		// One budget: exactly 5, or (a slow burst) at most what refilled.
		if r.Admitted < Rate || r.Admitted > r.Allowed || r.Kind != KindCorrect {
			t.Errorf("%s: %d admitted (%s) in %v; want %d (at most %d)", r.Strategy, r.Admitted, r.Kind, r.Wall, Rate, r.Allowed)
		}
	}
	if off := rs[2].SkewMS; len(off) != 2 || off[0] != -2000 || off[1] != 2000 {
		t.Errorf("dlock-skewed: offsets %v, want [-2000 2000]", off)
	}
}
