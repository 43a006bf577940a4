package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	"example.com/dlock/etcdstore/internal/etcdtest"
	"example.com/dlock/internal/faulttest"
)

// On a 3-member cluster, stores talking to different members exclude each
// other, queue in order and get increasing fences; then the leader is
// killed while a dlock Lease is held: the other store never gets the key
// while the Lease is valid (the session survives the election, or its loss
// is signalled first), and the killed member rejoins.
func TestClusterLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member cluster")
	}
	c := etcdtest.StartCluster(t, 3)
	const ttl = 3 * time.Second
	pfx := uniq(t)
	newOn := func(eps ...string) *etcdstore.Store {
		s, err := etcdstore.New(etcdtest.NewClient(t, eps...), etcdstore.Options{Prefix: pfx, SessionTTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := ctxT(t, 60*time.Second)
	acrossMembers(t, ctx, newOn(c.Members[0].ClientURL), newOn(c.Members[1].ClientURL))
	holder, other := newOn(c.Endpoints()...), newOn(c.Endpoints()...)
	dc, err := dlock.New(holder, dlock.WithAutoRenew(ttl))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, dc)
	l, err := dc.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	leader, err := c.Leader(ctx, etcdtest.NewClient(t, c.Endpoints()...))
	if err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	tries, taken := probeKey(ctx, other, 3*ttl)
	select {
	case <-l.Done():
		if taken.IsZero() {
			t.Logf("the lease was lost (%v) and the key not taken in %d tries", l.Err(), tries)
		}
	default:
		if !taken.IsZero() {
			t.Fatalf("the other store took the key while the holder's lease is valid (%d tries)", tries)
		}
		t.Logf("the lease survived the leader's death (%d tries by the other store, all refused)", tries)
	}
	t.Logf("lease err %v, valid until %v; key taken at %v after %d tries", l.Err(), l.ValidUntil().Format(time.StampMilli), taken.Format(time.StampMilli), tries)
	if !taken.IsZero() && !l.ValidUntil().Before(taken) {
		t.Fatalf("key taken at %v, while the lease was valid until %v", taken, l.ValidUntil())
	}
	if err := leader.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
}

// acrossMembers: stores on two members exclude each other, and a waiter on
// one gets the key released on the other with a greater fence.
func acrossMembers(t *testing.T, ctx context.Context, s0, s1 *etcdstore.Store) {
	const ttl = time.Second
	a := tok()
	g0, err := s0.Acquire(ctx, "k", a, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Acquire(ctx, "k", tok(), ttl); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("second member's store: %v", err)
	}
	if err := s0.Release(ctx, "k", a); err != nil {
		t.Fatal(err)
	}
	g1, err := s1.AcquireQueued(ctx, "k", a, ttl)
	if err != nil || g1.Fence <= g0.Fence {
		t.Fatalf("acquire on another member: %+v, %v", g1, err)
	}
	if err := s1.Release(ctx, "k", a); err != nil {
		t.Fatal(err)
	}

}

// probeKey tries to acquire key "k" on s every 50 ms for d, and returns how
// many tries it made and when one succeeded (zero if none).
func probeKey(ctx context.Context, s *etcdstore.Store, d time.Duration) (tries int, taken time.Time) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && taken.IsZero() {
		tries++
		actx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := s.Acquire(actx, "k", tok(), time.Second)
		cancel()
		if err == nil {
			taken = time.Now()
		}
		time.Sleep(50 * time.Millisecond) // pacing the probe, not synchronisation
	}
	return tries, taken
}
