package faulttest_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/overlap"
	"example.com/dlock/memstore"
)

// TestSeed: the environment's seed is used; without it seeds vary.
func TestSeed(t *testing.T) {
	t.Setenv("FAULTTEST_SEED", "42")
	if s := faulttest.Seed(t, "FAULTTEST_SEED"); s != 42 {
		t.Fatalf("seed %d, want 42", s)
	}
	t.Setenv("FAULTTEST_SEED", "")
	if faulttest.Seed(t, "FAULTTEST_SEED") == faulttest.Seed(t, "FAULTTEST_SEED") {
		t.Fatal("two random seeds are equal")
	}
}

// TestWithin: true as soon as the condition holds, false after the
// deadline when it never does.
func TestWithin(t *testing.T) {
	n := 0
	if !faulttest.Within(time.Second, func() bool { n++; return n == 3 }) || n != 3 {
		t.Fatalf("within: n = %d", n)
	}
	start := time.Now()
	if faulttest.Within(30*time.Millisecond, func() bool { return false }) || time.Since(start) < 30*time.Millisecond {
		t.Fatal("a condition that never holds")
	}
}

// TestHold: an unheeding holder works its time out; a heeding one stops
// at the loss. Both windows are recorded with their release.
func TestHold(t *testing.T) {
	ctx := context.Background()
	c, err := dlock.New(memstore.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	var rec overlap.Recorder
	l, err := c.Lock(ctx, "k", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	x := faulttest.Hold(l, time.Now(), "a", 20*time.Millisecond, true, &rec)
	if x.Lost || x.RelErr != nil || x.To.Sub(x.From) < 20*time.Millisecond || x.Fence != l.Fence() {
		t.Fatalf("window %+v", x)
	}
	l, err = c.Lock(ctx, "k", dlock.WithTTL(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	x = faulttest.Hold(l, time.Now(), "b", time.Minute, true, &rec)
	if !x.Lost || x.To.Sub(x.From) > 30*time.Second {
		t.Fatalf("heeding holder past its lease: %+v", x)
	}
	if len(rec.Windows()) != 2 {
		t.Fatalf("windows %v", rec.Windows())
	}
}

// sessionish is memstore with a session TTL in its model, for
// NoOwnerCheck's made-up grants.
type sessionish struct{ *memstore.Store }

func (s sessionish) Model() driver.Model {
	m := s.Store.Model()
	m.SessionTTL = time.Minute
	return m
}

// memClients returns two Clients on one memstore, through NoOwnerCheck
// if broken.
func memClients(t *testing.T, broken bool) []*dlock.Client {
	var m driver.Mutex = sessionish{memstore.New(nil)}
	if broken {
		m = faulttest.NoOwnerCheck{Mutex: m}
	}
	var clients []*dlock.Client
	for range 2 {
		c, err := dlock.New(m, dlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		faulttest.CloseOnCleanup(t, c)
		clients = append(clients, c)
	}
	return clients
}

// TestContenders: contenders on a real lock make many holdings and no
// overlap; on NoOwnerCheck (the control) they overlap.
func TestContenders(t *testing.T) {
	for _, broken := range []bool{false, true} {
		clients := memClients(t, broken)
		var rec overlap.Recorder
		stop := faulttest.Contenders(clients, 4, "k", 5*time.Second, 1, &rec)
		enough := faulttest.Within(10*time.Second, func() bool { return len(rec.Windows()) >= 40 })
		stop()
		stop() // twice: harmless
		bad := rec.Overlaps()
		t.Logf("broken=%v: %d holdings, %d overlaps, errors %v", broken, len(rec.Windows()), len(bad), rec.Errs())
		if !enough {
			t.Fatalf("broken=%v: %d holdings in 10 s", broken, len(rec.Windows()))
		}
		if (len(bad) > 0) != broken {
			t.Fatalf("broken=%v: %d overlaps", broken, len(bad))
		}
	}
}

// TestNoOwnerCheck: a held key is granted to another token (fence 1, half
// the session TTL), and its Extend and Release succeed; the store's own
// answers are unchanged otherwise.
func TestNoOwnerCheck(t *testing.T) {
	ctx := context.Background()
	n := faulttest.NoOwnerCheck{Mutex: sessionish{memstore.New(nil)}}
	if _, err := n.Acquire(ctx, "k", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	g, err := n.Acquire(ctx, "k", "b", time.Minute)
	if err != nil || g.Fence != 1 || g.TTL != 30*time.Second {
		t.Fatalf("second Acquire: %+v, %v", g, err)
	}
	if _, err := n.Extend(ctx, "k", "b", time.Minute); err != nil {
		t.Fatalf("Extend by a non-holder: %v", err)
	}
	if err := n.Release(ctx, "k", "b"); err != nil {
		t.Fatalf("Release by a non-holder: %v", err)
	}
	if g, err := n.Acquire(ctx, "k2", "a", time.Minute); err != nil || g.TTL != time.Minute {
		t.Fatalf("a free key: %+v, %v; want the store's grant", g, err)
	}
	if _, ok := driver.As[driver.Inspector](n); ok {
		t.Fatal("NoOwnerCheck shows the store's capabilities")
	}
}

// TestLeaderKill: on a sound lock (memstore; the "kill" does nothing)
// the long holding and 20 more are recorded without overlap; on
// NoOwnerCheck CheckOverlaps finds them (and would fail a sound test).
func TestLeaderKill(t *testing.T) {
	for _, broken := range []bool{false, true} {
		clients := memClients(t, broken)
		killed := false
		r := faulttest.LeaderKill{Clients: clients, Seed: 3, Hold: 100 * time.Millisecond, Settle: 10 * time.Second,
			Kill: func() { killed = true }}.Run(t, t.Context())
		if !killed || r.After < 20 || r.Long.Who != "c0/long" || r.Long.To.Sub(r.Long.From) < 100*time.Millisecond {
			t.Fatalf("broken=%v: killed %v, %d after, long %+v", broken, killed, r.After, r.Long)
		}
		if bad := faulttest.CheckOverlaps(t, r.Rec, broken); (len(bad) > 0) != broken {
			t.Fatalf("broken=%v: %d overlaps", broken, len(bad))
		}
	}
}
