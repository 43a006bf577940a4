package etcdstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestAcquireReentryRelease(t *testing.T) {
	s, cli := newStore(t, node(t), uniq(t), 0)
	ctx := ctxT(t, 20*time.Second)
	a := tok()
	g1, err := s.Acquire(ctx, "k", a, time.Second)
	if err != nil || g1.Holds != 1 || g1.Fence == 0 {
		t.Fatalf("first acquire: %+v, %v", g1, err)
	}
	if g1.TTL < etcdstore.DefaultSessionTTL/2 || g1.TTL > etcdstore.DefaultSessionTTL+time.Second {
		t.Fatalf("grant TTL %v, want about the session TTL %v", g1.TTL, etcdstore.DefaultSessionTTL)
	}
	g2, err := s.Acquire(ctx, "k", a, time.Second)
	if err != nil || g2.Holds != 2 || g2.Fence != g1.Fence {
		t.Fatalf("re-entry: %+v, %v (first %+v)", g2, err, g1)
	}
	info, err := s.Inspect(ctx, "k")
	if err != nil || !info.Held || info.Holds != 2 || info.Fence != g1.Fence || info.Token != a {
		t.Fatalf("inspect: %+v, %v", info, err)
	}
	if info.Remaining <= 0 || info.Remaining > etcdstore.DefaultSessionTTL {
		t.Fatalf("inspect remaining %v", info.Remaining)
	}
	if err := s.Release(ctx, "k", a); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Inspect(ctx, "k"); !info.Held || info.Holds != 1 {
		t.Fatalf("after one release: %+v", info)
	}
	if err := s.Release(ctx, "k", a); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "k", a); !errors.Is(err, driver.ErrNotHeld) || !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("third release: %v, want NotHeld(expired)", err)
	}
	resp, err := cli.Get(ctx, s.Prefix()+"k/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("keys left after release: %v %v", resp, err)
	}
	if info, _ := s.Inspect(ctx, "k"); info.Held {
		t.Fatalf("inspect after release: %+v", info)
	}
}

func TestFencesIncrease(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	s1, _ := newStore(t, c, pfx, 0)
	s2, _ := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 20*time.Second)
	var last uint64
	for i := range 10 {
		s := []*etcdstore.Store{s1, s2}[i%2]
		a := tok()
		g, err := s.Acquire(ctx, "f", a, time.Second)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if g.Fence <= last {
			t.Fatalf("round %d: fence %d not above %d", i, g.Fence, last)
		}
		last = g.Fence
		if err := s.Release(ctx, "f", a); err != nil {
			t.Fatal(err)
		}
	}
}

func TestContended(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	s1, _ := newStore(t, c, pfx, 0)
	s2, _ := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 20*time.Second)
	a, b := tok(), tok()
	if _, err := s1.Acquire(ctx, "c", a, time.Second); err != nil {
		t.Fatal(err)
	}
	_, err := s2.Acquire(ctx, "c", b, time.Second)
	var ce *driver.ContendedError
	if !errors.As(err, &ce) || !errors.Is(err, driver.ErrNotAcquired) || ce.Remaining >= 0 {
		t.Fatalf("contended acquire: %v", err)
	}
	if n, err := s1.Waiters(ctx, "c"); err != nil || n != 0 {
		t.Fatalf("a contended Acquire left a key: waiters %d, %v", n, err)
	}
	if err := s2.Release(ctx, "c", b); !errors.Is(err, driver.ErrNotHeld) || !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("release by non-holder: %v", err)
	}
	if _, err := s2.Extend(ctx, "c", b, time.Second); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("extend by non-holder: %v", err)
	}
	if info, _ := s1.Inspect(ctx, "c"); !info.Held || info.Holds != 1 {
		t.Fatalf("the holding changed: %+v", info)
	}
}

// Two holdings of one Store (one session) on one name get two keys: the
// second is contended, not granted (concurrency.Mutex's footgun).
func TestTwoTokensOneStore(t *testing.T) {
	s, _ := newStore(t, node(t), uniq(t), 0)
	ctx := ctxT(t, 20*time.Second)
	a, b := tok(), tok()
	if _, err := s.Acquire(ctx, "two", a, time.Second); err != nil {
		t.Fatal(err)
	}
	if g, err := s.Acquire(ctx, "two", b, time.Second); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("second token of the same store got %+v, %v", g, err)
	}
	if err := s.Release(ctx, "two", b); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("release by the other token: %v", err)
	}
	if err := s.Release(ctx, "two", a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "two", b, time.Second); err != nil {
		t.Fatalf("b after a released: %v", err)
	}
}

func TestExtend(t *testing.T) {
	s, _ := newStore(t, node(t), uniq(t), 3*time.Second)
	ctx := ctxT(t, 20*time.Second)
	a := tok()
	g, err := s.Acquire(ctx, "e", a, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	res := s.ExtendBatch(ctx, []driver.ExtendRequest{{Key: "e", Token: a}, {Key: "e", Token: tok()}, {Key: "none", Token: a}})
	if res[0].Err != nil || res[0].Grant.Fence != g.Fence || res[0].Grant.Holds != 1 || res[0].Grant.TTL < 2*time.Second {
		t.Fatalf("extend of the holder: %+v", res[0])
	}
	if !errors.Is(res[1].Err, driver.ErrTaken) || !errors.Is(res[2].Err, driver.ErrExpired) {
		t.Fatalf("extend of non-holders: %v / %v", res[1].Err, res[2].Err)
	}
	// Renewal keeps the holding past several session TTLs.
	deadline := time.Now().Add(7 * time.Second)
	for time.Now().Before(deadline) {
		g2, err := s.Extend(ctx, "e", a, time.Second)
		if err != nil || g2.Fence != g.Fence {
			t.Fatalf("extend: %+v, %v", g2, err)
		}
		select {
		case <-time.After(time.Second): // the renewal period under test, not synchronisation
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
}

func TestBadInput(t *testing.T) {
	if _, err := etcdstore.New(nil, etcdstore.Options{}); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("nil client: %v", err)
	}
	cli := node(t).Client(t)
	for _, ttl := range []time.Duration{time.Second, 2500 * time.Millisecond, -time.Second} {
		if _, err := etcdstore.New(cli, etcdstore.Options{SessionTTL: ttl}); !errors.Is(err, driver.ErrInvalid) {
			t.Fatalf("session TTL %v: %v", ttl, err)
		}
	}
}
