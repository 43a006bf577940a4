package etcdstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	"example.com/dlock/etcdstore/internal/etcdtest"
	"example.com/dlock/internal/faulttest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A waiter of another store, queued before a transfer, becomes the holder
// with a fence greater than the transferred holding's, although its key was
// created before the transfer (the control: its CreateRevision, the fence
// it would have had, is not above the transfer's). The transfer kept the key's
// place: the waiter was not woken by it.
func TestTransferThenQueuedWaiterFence(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	s1, cli := newStore(t, c, pfx, 0)
	s2, _ := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 30*time.Second)
	a, b := tok(), tok()
	g1, err := s1.Acquire(ctx, "t", a, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		g   driver.Grant
		err error
	}
	done := make(chan res, 1)
	go func() {
		g, err := s2.AcquireQueued(ctx, "t", tok(), time.Second)
		done <- res{g, err}
	}()
	waitFor(t, 10*time.Second, "the waiter's key", func() bool { return waiters(t, s1, "t") == 1 })
	keys, err := cli.Get(ctx, pfx+"t/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil || len(keys.Kvs) != 2 {
		t.Fatal(keys, err)
	}
	waiterCreate := keys.Kvs[1].CreateRevision
	g2, err := s1.Transfer(ctx, "t", a, b, time.Second)
	if err != nil || g2.Fence <= g1.Fence || g2.Holds != 1 {
		t.Fatalf("Transfer = %+v, %v; want one hold and a fence above %d", g2, err, g1.Fence)
	}
	if uint64(waiterCreate) > g2.Fence {
		t.Fatalf("control: the waiter's CreateRevision %d is above the transfer's fence %d", waiterCreate, g2.Fence)
	}
	select {
	case r := <-done:
		t.Fatalf("the waiter got the lock from a transfer: %+v, %v", r.g, r.err)
	default:
	}
	if info, err := s2.Inspect(ctx, "t"); err != nil || info.Fence != g2.Fence || info.Holds != 1 {
		t.Fatalf("Inspect by another store = %+v, %v; want fence %d", info, err, g2.Fence)
	}
	if e, err := s1.Extend(ctx, "t", b, time.Second); err != nil || e.Fence != g2.Fence {
		t.Fatalf("Extend of the transferred holding = %+v, %v; want fence %d", e, err, g2.Fence)
	}
	if err := s1.Release(ctx, "t", a); !errors.Is(err, driver.ErrTaken) {
		t.Fatalf("Release by the previous holder: %v, want ErrTaken", err)
	}
	if err := s1.Release(ctx, "t", b); err != nil {
		t.Fatal(err)
	}
	var r res
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("the queued waiter did not get the lock")
	}
	if r.err != nil || r.g.Fence <= g2.Fence {
		t.Fatalf("queued waiter: %+v, %v; want a fence above the transfer's %d", r.g, r.err, g2.Fence)
	}
}

// After a transfer the previous holder's OwnerCmp no longer holds, the new
// holder's does; a comparison on the key's CreateRevision (what OwnerCmp
// compared before transfers existed) would still let the previous holder
// write: the control.
func TestTransferOwnerCmp(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	s, cli := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 20*time.Second)
	a, b := tok(), tok()
	g1, err := s.Acquire(ctx, "o", a, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.OwnerCmp("o", g1.Fence)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := cli.Get(ctx, pfx+"o/", clientv3.WithFirstCreate()...)
	if err != nil || len(kv.Kvs) != 1 {
		t.Fatal(kv, err)
	}
	byCreate := clientv3.Compare(clientv3.CreateRevision(string(kv.Kvs[0].Key)), "=", kv.Kvs[0].CreateRevision)
	g2, err := s.Transfer(ctx, "o", a, b, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	write := func(cmp clientv3.Cmp) bool {
		resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(pfx+"res", "x")).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}
	if write(old) {
		t.Fatal("the previous holder's guarded write landed after the transfer")
	}
	if !write(byCreate) {
		t.Fatal("control: a CreateRevision comparison was refused; the test shows nothing")
	}
	if _, err := s.OwnerCmp("o", g1.Fence); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("OwnerCmp of the handed-on holding: %v, want ErrNotHeld", err)
	}
	cur, err := s.OwnerCmp("o", g2.Fence)
	if err != nil || !write(cur) {
		t.Fatalf("the new holder's guarded write: %v", err)
	}
}

// Two Clients (two stores, as two processes), many goroutines each, one
// key: with local handoffs (Transfer) and waits in etcd's queue mixed, no
// two critical sections overlap and every critical section's fence is
// greater than the one before it. The control runs the same loop with the
// lock taken by TryLock on a key nobody else uses, on one side only: the
// detector then sees overlaps.
func TestClientsTransferExclusionAndFences(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	if overlaps, _, _ := fenceRace(t, c, pfx, true); overlaps == 0 {
		t.Fatal("control: a broken lock showed no overlap; the detector sees nothing")
	}
	overlaps, inverted, handoffs := fenceRace(t, c, pfx, false)
	t.Logf("%d local handoffs", handoffs)
	if overlaps != 0 || inverted != 0 || handoffs == 0 {
		t.Fatalf("%d overlaps, %d fences not above the previous section's, %d local handoffs (want some)", overlaps, inverted, handoffs)
	}
}

// countingStore counts the transfers the Client makes through the store.
type countingStore struct {
	*etcdstore.Store
	n *atomic.Int64
}

func (c countingStore) Transfer(ctx context.Context, key, from, to string, ttl time.Duration) (driver.Grant, error) {
	c.n.Add(1)
	return c.Store.Transfer(ctx, key, from, to, ttl)
}

// fenceRace runs 2 Clients x 6 goroutines x 15 critical sections on one
// key and counts overlaps, fences that did not increase and local
// handoffs. broken makes the second Client lock another key (no exclusion).
func fenceRace(t *testing.T, c *etcdtest.Cluster, pfx string, broken bool) (overlaps, inverted int, handoffs int64) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	var transfers atomic.Int64
	var mu sync.Mutex
	inside, last := 0, uint64(0)
	var wg sync.WaitGroup
	for p := range 2 {
		st, err := etcdstore.New(c.Client(t), etcdstore.Options{Prefix: pfx})
		if err != nil {
			t.Fatal(err)
		}
		dc, err := dlock.New(countingStore{st, &transfers})
		if err != nil {
			t.Fatal(err)
		}
		faulttest.CloseOnCleanup(t, dc)
		t.Cleanup(func() { _ = dc.Close(context.Background()); _ = st.Close(context.Background()) })
		key := "race"
		if broken && p == 1 {
			key = "race-other"
		}
		for range 6 {
			wg.Go(func() {
				for range 15 {
					l, err := dc.Lock(ctx, key, dlock.WithWait(30*time.Second))
					if err != nil {
						mu.Lock()
						inverted++ // counted as a failure of the run
						mu.Unlock()
						return
					}
					mu.Lock()
					inside++
					if inside > 1 {
						overlaps++
					}
					if key == "race" {
						if l.Fence() <= last {
							inverted++
						}
						last = max(last, l.Fence())
					}
					mu.Unlock()
					time.Sleep(200 * time.Microsecond) // the critical section's work
					mu.Lock()
					inside--
					mu.Unlock()
					_ = l.Release(ctx)
				}
			})
		}
	}
	wg.Wait()
	return overlaps, inverted, transfers.Load()
}
