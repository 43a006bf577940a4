package etcdstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// admissionRace runs clients × goroutines racers, each taking k (1 or 2)
// of key's limit permits rounds times on its client, and counts the
// entries that found more than limit permits inside (overlaps).
func admissionRace(t *testing.T, stores []*etcdstore.Store, key string, limit, goroutines, rounds int, seed uint64) (overlaps, sections int) {
	t.Helper()
	var inside, over, done atomic.Int32
	var wg sync.WaitGroup
	ctx := ctxT(t, 60*time.Second)
	for c, s := range stores {
		for g := range goroutines {
			rng := rand.New(rand.NewPCG(seed, uint64(c*100+g)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for got, tries := 0, 0; got < rounds && tries < 2000; tries++ {
					tk, k := tok(), 1+rng.IntN(2)
					_, err := s.AcquirePermits(ctx, key, tk, limit, k, time.Minute)
					if err != nil {
						if !errors.Is(err, driver.ErrNotAcquired) {
							_ = s.ReleasePermits(ctx, key, tk) // outcome unknown: give back
						}
						continue
					}
					if inside.Add(int32(k)) > int32(limit) {
						over.Add(1)
					}
					time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond) // the work: widens a window
					inside.Add(-int32(k))
					if err := s.ReleasePermits(ctx, key, tk); err != nil {
						t.Errorf("ReleasePermits: %v", err)
					}
					done.Add(1)
					got++
				}
			}()
		}
	}
	wg.Wait()
	return int(over.Load()), int(done.Load())
}

// TestSemaphoreAdmissionIsGuarded: acquirers on three clients never hold
// more than the limit together, because each admission is a transaction
// guarded by the revision of the read it decided on. Negative control: with
// the guard reduced to "the token has no holding yet", the same race
// over-admits.
func TestSemaphoreAdmissionIsGuarded(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	run := func(unguarded bool) (int, int) {
		var stores []*etcdstore.Store
		for range 3 {
			s, _ := newStore(t, c, pfx, 5*time.Second)
			etcdstore.SetUnguarded(s, unguarded)
			stores = append(stores, s)
		}
		return admissionRace(t, stores, "sem-"+tok()[:6], 2, 4, 6, seed)
	}
	over, n := run(false)
	t.Logf("guarded: %d overlaps in %d holdings", over, n)
	if over > 0 {
		t.Fatalf("%d overlaps in %d holdings: more than 2 of 2 permits out at once (seed %d)", over, n, seed)
	}
	if n != 3*4*6 {
		t.Fatalf("%d of %d holdings completed (seed %d)", n, 3*4*6, seed)
	}
	for i := range 3 { // the control: overlaps are likely, not certain, in one run
		over, n = run(true)
		t.Logf("control run %d, unguarded: %d overlaps in %d holdings", i, over, n)
		if over > 0 {
			return
		}
	}
	t.Fatalf("the unguarded control never over-admitted in 3 runs: the race does not test the guard (seed %d)", seed)
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
