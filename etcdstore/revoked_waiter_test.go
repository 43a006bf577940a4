package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"
)

// TestRWRevokedWaiterNeverHolds is etcd #16221 on dlock's read-write lock:
// a writer waits for the lock (refused, then woken by the holder's
// release); its session is revoked while it waits. When it then gets the
// lock, its holding must be a live one: a third writer is refused. The
// check is first run on etcd's own recipe (experimental/recipes RWMutex),
// whose waiter owns after waiting without looking at its revoked key: there
// the third writer gets in too (the negative control).
func TestRWRevokedWaiterNeverHolds(t *testing.T) {
	c := node(t)
	admin := c.Client(t)
	ctx := ctxT(t, 60*time.Second)
	t.Run("control: etcd's recipe", func(t *testing.T) {
		if !recipeRevokedWaiterOverlaps(t, c.Client(t), c.Client(t), c.Client(t), admin, uniq(t)) {
			t.Fatal("etcd's recipe did not let a third writer in after its waiter's session was revoked: the check cannot tell")
		}
	})
	pfx := uniq(t)
	a, _ := newStore(t, c, pfx, 5*time.Second)
	b, _ := newStore(t, c, pfx, 5*time.Second)
	third, _ := newStore(t, c, pfx, 5*time.Second)
	ta, tb := tok(), tok()
	if _, err := a.AcquireWrite(ctx, "k", ta, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireWrite(ctx, "k", tb, time.Minute); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("the waiter's first try: %v, want ErrNotAcquired", err)
	}
	wake, cancel, err := b.SubscribeRW(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	revoked := clientv3.LeaseID(etcdstore.SessionID(b))
	if _, err := admin.Revoke(ctx, revoked); err != nil {
		t.Fatal(err)
	}
	if err := a.ReleaseRW(ctx, "k", ta); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("the waiter was not woken by the release")
	}
	if _, err := b.AcquireWrite(ctx, "k", tb, time.Minute); err != nil {
		t.Fatalf("the woken waiter's try: %v (an error is safe; this test wants the holding checked)", err)
	}
	if _, err := third.AcquireWrite(ctx, "k", tok(), time.Minute); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("a third writer while the revoked waiter holds: %v, want ErrNotAcquired (two writers)", err)
	}
	_, rwPfx := etcdstore.FamilyPrefixes(pfx, "k")
	lease := holdingLease(t, admin, rwPfx+"x/")
	if ttl, err := admin.TimeToLive(ctx, lease); err != nil || ttl.TTL <= 0 || lease == revoked {
		t.Fatalf("the waiter holds on lease %x (revoked %x) with TTL %v, %v: want a live new session", lease, revoked, ttl.TTL, err)
	}
}

// recipeRevokedWaiterOverlaps runs the scenario of
// TestRWRevokedWaiterNeverHolds on etcd's recipe RWMutex and reports
// whether a third writer got the lock while the revoked waiter believed it
// held it.
func recipeRevokedWaiterOverlaps(t *testing.T, ca, cb, cc, admin *clientv3.Client, pfx string) bool {
	sess := func(cli *clientv3.Client) *concurrency.Session {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	sa, sb, sc := sess(ca), sess(cb), sess(cc)
	ra, rb, rc := recipe.NewRWMutex(sa, pfx), recipe.NewRWMutex(sb, pfx), recipe.NewRWMutex(sc, pfx)
	if err := ra.Lock(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 20*time.Second)
	puts := admin.Watch(ctx, pfx, clientv3.WithPrefix(), clientv3.WithFilterDelete())
	lockB := make(chan error, 1)
	go func() { lockB <- rb.Lock() }()
	for waiting := false; !waiting; { // the waiter's key is in: it waits
		select {
		case wr := <-puts:
			for _, e := range wr.Events {
				waiting = waiting || clientv3.LeaseID(e.Kv.Lease) == sb.Lease()
			}
		case <-ctx.Done():
			t.Fatal("the recipe's waiter never put its key")
		}
	}
	if _, err := admin.Revoke(ctx, sb.Lease()); err != nil {
		t.Fatal(err)
	}
	if err := ra.Unlock(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lockB:
		if err != nil {
			t.Logf("the recipe's revoked waiter failed: %v", err)
			return false
		}
	case <-ctx.Done():
		t.Fatal("the recipe's waiter neither got the lock nor failed")
	}
	lockC := make(chan error, 1)
	go func() { lockC <- rc.Lock() }()
	select {
	case err := <-lockC:
		t.Logf("etcd's recipe: the revoked waiter holds, and a third writer got in too (%v)", err)
		return err == nil
	case <-time.After(2 * time.Second):
		return false // the third writer waits (its goroutine ends with the test's sessions)
	}
}

// TestSemaphoreRevokedSessionTakesNothing: once the server has revoked a
// store's session, its permits are back, and its next AcquirePermits puts
// nothing on the dead lease: it gets a holding on a new, live session (or
// fails), never one the server has already deleted.
func TestSemaphoreRevokedSessionTakesNothing(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	s, _ := newStore(t, c, pfx, 5*time.Second)
	admin := c.Client(t)
	ctx := ctxT(t, 30*time.Second)
	a := tok()
	if _, err := s.AcquirePermits(ctx, "k", a, 1, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	semPfx, _ := etcdstore.FamilyPrefixes(pfx, "k")
	old := holdingLease(t, admin, semPfx)
	if _, err := admin.Revoke(ctx, old); err != nil {
		t.Fatal(err)
	}
	b := tok() // the store still believes its session alive: the put on the dead lease fails
	if _, err := s.AcquirePermits(ctx, "k", b, 1, 1, time.Minute); err != nil {
		t.Fatalf("AcquirePermits after the revocation: %v", err)
	}
	if _, err := s.ExtendPermits(ctx, "k", a, time.Minute); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("ExtendPermits of the revoked holding: %v, want ErrExpired", err)
	}
	lease := holdingLease(t, admin, semPfx)
	ttl, err := admin.TimeToLive(ctx, lease)
	if err != nil || ttl.TTL <= 0 || lease == old {
		t.Fatalf("the new holding is on lease %x (old %x) with TTL %v, %v: want a live new lease", lease, old, ttl.TTL, err)
	}
}

// holdingLease returns the lease of the only key under pfx.
func holdingLease(t *testing.T, admin *clientv3.Client, pfx string) clientv3.LeaseID {
	t.Helper()
	resp, err := admin.Get(context.Background(), pfx, clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("keys under %q: %d, %v; want 1", pfx, len(resp.Kvs), err)
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}
