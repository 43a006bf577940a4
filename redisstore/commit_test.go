package redisstore_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/stepcall"
)

func TestReleaseWriteWritesOnlyForTheHolder(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	const res = "res"
	rdb.Set(ctx, res, "orig", 0)
	if err := stepcall.ReleaseWrite(ctx, s, "k", "a", res, "free"); !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrExpired) {
		t.Fatalf("ReleaseWrite of a free key = %v, want ErrNotHeld and ErrExpired", err)
	}
	if _, err := s.Acquire(ctx, "k", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := stepcall.ReleaseWrite(ctx, s, "k", "x", res, "taken"); !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrTaken) {
		t.Fatalf("ReleaseWrite by a non-holder = %v, want ErrNotHeld and ErrTaken", err)
	}
	if v := rdb.Get(ctx, res).Val(); v != "orig" {
		t.Fatalf("refused writes changed the resource to %q", v)
	}
	// Re-entered: the write lands and one hold goes.
	if _, err := s.Acquire(ctx, "k", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := stepcall.ReleaseWrite(ctx, s, "k", "a", res, "one"); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Inspect(ctx, "k"); info.Token != "a" || info.Holds != 1 || rdb.Get(ctx, res).Val() != "one" {
		t.Fatalf("after ReleaseWrite of one of two holds: %+v, resource %q", info, rdb.Get(ctx, res).Val())
	}
	// The last hold: written and freed; a hash resource is replaced (SET).
	rdb.Del(ctx, res)
	rdb.HSet(ctx, res, "f", "v")
	if err := stepcall.ReleaseWrite(ctx, s, "k", "a", res, "two"); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Inspect(ctx, "k"); info.Held || rdb.Get(ctx, res).Val() != "two" {
		t.Fatalf("after the last ReleaseWrite: %+v, resource %q", info, rdb.Get(ctx, res).Val())
	}
}

func TestTransferWriteWritesThenHandsOver(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	g1, err := s.Acquire(ctx, "k", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Set(ctx, "other", "o", 0)
	rdb.HSet(ctx, "hash", "f", "v")
	// Refusals write nothing: a non-holder, a WRONGTYPE read, a re-entered lock.
	if _, _, err := stepcall.TransferWrite(ctx, s, "k", "x", "b", time.Minute, "res", "bad", ""); !errors.Is(err, dlock.ErrTaken) {
		t.Fatalf("TransferWrite by a non-holder = %v, want ErrTaken", err)
	}
	if _, _, err := stepcall.TransferWrite(ctx, s, "k", "a", "b", time.Minute, "res", "bad", "hash"); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("TransferWrite reading a hash = %v, want ErrInvalid", err)
	}
	s.Acquire(ctx, "k", "a", time.Minute)
	if _, _, err := stepcall.TransferWrite(ctx, s, "k", "a", "b", time.Minute, "res", "bad", ""); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("TransferWrite of a re-entered lock = %v, want ErrInvalid", err)
	}
	if n := rdb.Exists(ctx, "res").Val(); n != 0 {
		t.Fatal("a refused TransferWrite wrote the resource")
	}
	if info, _ := s.Inspect(ctx, "k"); info.Token != "a" || info.Holds != 2 || info.Fence != g1.Fence {
		t.Fatalf("refused transfers changed the lock: %+v", info)
	}
	s.Release(ctx, "k", "a")
	g2, v, err := stepcall.TransferWrite(ctx, s, "k", "a", "b", time.Minute, "res", "new", "other")
	if err != nil || g2.Fence <= g1.Fence || g2.Holds != 1 || v != (driver.Value{Data: "o", Found: true}) {
		t.Fatalf("TransferWrite = %+v %+v %v, want a greater fence and the other key's value", g2, v, err)
	}
	if info, _ := s.Inspect(ctx, "k"); info.Token != "b" || rdb.Get(ctx, "res").Val() != "new" {
		t.Fatalf("after TransferWrite: %+v, resource %q", info, rdb.Get(ctx, "res").Val())
	}
	g3, v, err := stepcall.TransferWrite(ctx, s, "k", "b", "c", time.Minute, "res", "newer", "res")
	if err != nil || g3.Fence <= g2.Fence || v != (driver.Value{Data: "newer", Found: true}) {
		t.Fatalf("TransferWrite reading its own resource = %+v %+v %v, want the value just written", g3, v, err)
	}
}

// A holder whose lock was taken over in the store (here: deleted, then taken
// by another client) while its local lease still looks valid cannot write
// through Commit. The negative control, a plain SET before Release, shows
// the stale write that Commit prevents.
func TestCommitRefusesAHolderThatLostTheLock(t *testing.T) {
	_, rdb := newRedis(t)
	ctx := testCtx(t)
	stale, next := newClient(t, rdb), newClient(t, rdb)
	const res = "stock"
	for _, commit := range []bool{true, false} {
		rdb.Set(ctx, res, "10", 0)
		l, err := stale.Lock(ctx, "item", dlock.WithRead(res), dlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		lock, _ := newStore(t, rdb).Keys("item")
		rdb.Del(ctx, lock) // the lock is gone (failover, eviction, an operator)
		l2, err := next.Lock(ctx, "item", dlock.WithRead(res))
		if err != nil {
			t.Fatal(err)
		}
		if err := l2.Commit(ctx, "9"); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := l.Commit(ctx, "stale"); !errors.Is(err, dlock.ErrLost) {
				t.Fatalf("Commit by a holder that lost the lock = %v, want ErrLost", err)
			}
			if v := rdb.Get(ctx, res).Val(); v != "9" {
				t.Fatalf("resource %q after a refused Commit, want 9", v)
			}
			continue
		}
		rdb.Set(ctx, res, "stale", 0)
		if err := l.Release(ctx); !errors.Is(err, dlock.ErrLost) {
			t.Fatalf("Release by a holder that lost the lock = %v, want ErrLost", err)
		}
		if v := rdb.Get(ctx, res).Val(); v != "stale" {
			t.Fatalf("control: resource %q, want the stale write to land (the test cannot tell)", v)
		}
	}
}

func TestCommitNeedsAValueRead(t *testing.T) {
	_, rdb := newRedis(t)
	c := newClient(t, rdb)
	ctx := testCtx(t)
	l, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Commit(ctx, "v"); !errors.Is(err, dlock.ErrInvalid) || l.Err() != nil {
		t.Fatalf("Commit without WithRead = %v (lease err %v), want ErrInvalid and the lease still held", err, l.Err())
	}
	if n := rdb.DBSize(ctx).Val(); n != 1 { // the lock (its fence inside), nothing written
		t.Fatalf("%d keys after a refused Commit, want 1", n)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCommitOnReentryKeepsTheOuterHold(t *testing.T) {
	_, rdb := newRedis(t)
	c := newClient(t, rdb)
	ctx := dlock.ContextWithOwner(testCtx(t), dlock.NewOwner())
	outer, err := c.Lock(ctx, "k", dlock.WithRead("res"))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Lock(ctx, "k", dlock.WithRead("res"))
	if err != nil {
		t.Fatal(err)
	}
	if err := inner.Commit(ctx, "in"); err != nil {
		t.Fatal(err)
	}
	info, _ := newStore(t, rdb).Inspect(ctx, "k")
	if !info.Held || info.Holds != 1 || rdb.Get(ctx, "res").Val() != "in" {
		t.Fatalf("after the inner Commit: %+v, resource %q; want one hold left and the write", info, rdb.Get(ctx, "res").Val())
	}
	if err := outer.Commit(ctx, "out"); err != nil {
		t.Fatal(err)
	}
	if info, _ := newStore(t, rdb).Inspect(ctx, "k"); info.Held || rdb.Get(ctx, "res").Val() != "out" {
		t.Fatalf("after the outer Commit: %+v", info)
	}
}

// commitRun has 2 clients (as 2 processes) × 8 goroutines increment a
// counter 25 times each through Value and Commit only: no GET, no SET. It
// returns the values seen in order, the final counter and the round trips
// per holding.
func commitRun(t *testing.T, addr string) (seen []int, final int, perHolding float64) {
	ctx := testCtx(t)
	rt := &roundTrips{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = rdb.Close() })
		rdb.AddHook(rt)
		c := newClient(t, rdb)
		for range 8 {
			wg.Go(func() {
				for range 25 {
					l, err := c.Lock(ctx, "commit", dlock.WithRead("commit:n"))
					if err != nil {
						t.Errorf("Lock: %v", err)
						return
					}
					v, _ := l.Value()
					n, _ := strconv.Atoi(v)
					mu.Lock()
					seen = append(seen, n)
					mu.Unlock()
					if err := l.Commit(ctx, strconv.Itoa(n+1)); err != nil {
						t.Errorf("Commit: %v", err)
					}
				}
			})
		}
	}
	wg.Wait()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	final, _ = rdb.Get(ctx, "commit:n").Int()
	return seen, final, float64(rt.n.Load()) / float64(max(1, len(seen)))
}

func TestCommitCountsExactlyAcrossClients(t *testing.T) {
	srv, rdb := newRedis(t)
	seen, final, perHolding := commitRun(t, srv.Addr())
	t.Logf("round trips per read-modify-write critical section, everything included: %.2f", perHolding)
	if len(seen) != 400 || final != 400 {
		t.Fatalf("%d holdings, final counter %d; want 400 and 400", len(seen), final)
	}
	for i, n := range seen {
		if n != i {
			t.Fatalf("holding %d read %d: a stale or skipped value", i, n)
		}
	}
	if perHolding >= 1.6 {
		t.Fatalf("%.2f round trips per critical section, want < 1.6 (handoffs fold lock, read, write and unlock into one)", perHolding)
	}
	// Negative control: the same increments with no lock (GET, then SET)
	// lose updates, so the exact count above is evidence.
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 25 {
				n, _ := rdb.Get(ctx, "nolock:n").Int()
				rdb.Set(ctx, "nolock:n", n+1, 0)
			}
		})
	}
	wg.Wait()
	if n, _ := rdb.Get(ctx, "nolock:n").Int(); n == 400 {
		t.Fatal("control without a lock counted exactly too: the test cannot tell")
	}
}
