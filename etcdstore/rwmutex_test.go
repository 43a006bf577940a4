package etcdstore_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"
)

// rwRace runs goroutines racers on each store, each taking key rounds
// times (a write one time in three, else a read), and counts the entries
// that broke the rule: a writer with anyone inside, or a reader with a
// writer inside.
func rwRace(t *testing.T, stores []*etcdstore.Store, key string, goroutines, rounds int, seed uint64) (overlaps, sections int) {
	t.Helper()
	var readers, writers, over, done atomic.Int32
	var wg sync.WaitGroup
	ctx := ctxT(t, 60*time.Second)
	for c, s := range stores {
		for g := range goroutines {
			rng := rand.New(rand.NewPCG(seed, uint64(c*100+g)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for got, tries := 0, 0; got < rounds && tries < 3000; tries++ {
					tk, write := tok(), rng.IntN(3) == 0
					var err error
					if write {
						_, err = s.AcquireWrite(ctx, key, tk, time.Minute)
					} else {
						_, err = s.AcquireRead(ctx, key, tk, time.Minute)
					}
					if err != nil {
						if !errors.Is(err, driver.ErrNotAcquired) {
							_ = s.ReleaseRW(ctx, key, tk) // outcome unknown: give back
						}
						time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // load, not synchronisation
						continue
					}
					if write {
						if writers.Add(1) > 1 || readers.Load() > 0 {
							over.Add(1)
						}
					} else if readers.Add(1); writers.Load() > 0 {
						over.Add(1)
					}
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // the work: widens a window
					if write {
						writers.Add(-1)
					} else {
						readers.Add(-1)
					}
					if err := s.ReleaseRW(ctx, key, tk); err != nil {
						t.Errorf("ReleaseRW: %v", err)
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

// TestRWAdmissionIsGuarded: readers and writers on three clients never
// overlap a writer, because each admission is one transaction whose guards
// are the other mode's keys. Negative control: readers admitted without the
// writer guards overlap writers in the same race.
func TestRWAdmissionIsGuarded(t *testing.T) {
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
		return rwRace(t, stores, "rw-"+tok()[:6], 4, 6, seed)
	}
	over, n := run(false)
	t.Logf("guarded: %d overlaps in %d holdings", over, n)
	if over > 0 || n != 3*4*6 {
		t.Fatalf("%d overlaps in %d of %d holdings (seed %d): want none, all completed", over, n, 3*4*6, seed)
	}
	for i := range 3 { // the control: overlaps are likely, not certain, in one run
		over, n = run(true)
		t.Logf("control run %d, readers ignoring writers: %d overlaps in %d holdings", i, over, n)
		if over > 0 {
			return
		}
	}
	t.Fatalf("the unguarded control never overlapped in 3 runs: the race does not test the guards (seed %d)", seed)
}

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

// TestFamilyKeysAreNotMutexKeys: the keys of a semaphore and of a
// read-write lock live outside every Mutex key's prefix: List shows none
// of them, and the Mutex of the same name is free. Control: a held Mutex
// key is listed.
func TestFamilyKeysAreNotMutexKeys(t *testing.T) {
	c := node(t)
	s, _ := newStore(t, c, uniq(t), 5*time.Second)
	ctx := ctxT(t, 20*time.Second)
	for _, k := range []string{"a", "a/b"} {
		if _, err := s.AcquirePermits(ctx, k, tok(), 2, 1, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcquireRead(ctx, k, tok(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcquireWrite(ctx, k, tok(), time.Minute); !errors.Is(err, driver.ErrNotAcquired) { // a mark
			t.Fatal(err)
		}
	}
	if _, err := s.Acquire(ctx, "m", tok(), time.Minute); err != nil {
		t.Fatal(err)
	}
	var listed []string
	if err := s.List(ctx, "", func(key string, _ driver.Info) bool { listed = append(listed, key); return true }); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0] != "m" {
		t.Fatalf("List = %q, want only the mutex key \"m\"", listed)
	}
	if _, err := s.Acquire(ctx, "a", tok(), time.Minute); err != nil {
		t.Fatalf("the Mutex \"a\" beside a semaphore and a read-write lock \"a\" and \"a/b\": %v, want it free", err)
	}
	if info, err := s.InspectPermits(ctx, "a"); err != nil || info.Used != 1 || len(info.Holders) != 1 {
		t.Fatalf("InspectPermits(\"a\") = %+v, %v: want its own holding only, not \"a/b\"'s", info, err)
	}
}
