package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/redisstore"
)

func TestTransferIsANewHolding(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	if _, err := s.Transfer(ctx, "k", "a", "b", time.Minute); !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrExpired) {
		t.Fatalf("transfer of a free key = %v, want ErrNotHeld and ErrExpired", err)
	}
	g1, err := s.Acquire(ctx, "k", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transfer(ctx, "k", "x", "b", time.Minute); !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrTaken) {
		t.Fatalf("transfer by a non-holder = %v, want ErrNotHeld and ErrTaken", err)
	}
	// Re-entered: not transferable, nothing changes.
	if _, err := s.Acquire(ctx, "k", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transfer(ctx, "k", "a", "b", time.Minute); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("transfer of a re-entered lock = %v, want ErrInvalid", err)
	}
	if info, _ := s.Inspect(ctx, "k"); info.Token != "a" || info.Holds != 2 {
		t.Fatalf("after refused transfer: %+v", info)
	}
	if err := s.Release(ctx, "k", "a"); err != nil {
		t.Fatal(err)
	}
	g2, err := s.Transfer(ctx, "k", "a", "b", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if g2.Fence <= g1.Fence || g2.Holds != 1 {
		t.Fatalf("transfer grant %+v after %+v: want a greater fence and one hold", g2, g1)
	}
	info, err := s.Inspect(ctx, "k")
	if err != nil || info.Token != "b" || info.Holds != 1 || info.Remaining > 500*time.Millisecond {
		t.Fatalf("after transfer: %+v %v", info, err)
	}
	if err := s.Release(ctx, "k", "a"); !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrTaken) {
		t.Fatalf("old holder's release after transfer = %v, want ErrNotHeld and ErrTaken", err)
	}
}

// onlyStore hides the optional Transferer capability (the negative control
// for handoff).
type onlyStore struct {
	driver.Mutex
	driver.Notifier
}

// roundTrips counts commands and pipelines sent through a client.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

// handoffRun has 10 goroutines of one client take the same key 20 times
// each; it returns the fences in acquisition order and the round trips the
// locking cost per holding.
func handoffRun(t *testing.T, addr string, hide bool) ([]uint64, float64) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	rt := &roundTrips{}
	rdb.AddHook(rt)
	s, err := redisstore.New(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var st driver.Mutex = s
	if hide {
		st = onlyStore{s, s}
	}
	c, err := dlock.New(st)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	ctx := testCtx(t)
	var mu sync.Mutex
	var fences []uint64
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for range 20 {
				l, err := c.Lock(ctx, "handoff")
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				mu.Lock()
				fences = append(fences, l.Fence())
				mu.Unlock()
				// Written under the lock with its fence: must never be stale.
				if err := redisstore.SetFenced(ctx, rdb, "resource", strconv.Itoa(len(fences)), l.Fence()); err != nil {
					t.Errorf("fenced write by the holder: %v", err)
				}
				if err := l.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	lockRT := rt.n.Load() - int64(len(fences)) // minus the fenced writes
	return fences, float64(lockRT) / float64(len(fences))
}

func TestLocalHandoffKeepsFencesStrictAndSavesRoundTrips(t *testing.T) {
	srv, rdb := newRedis(t)
	fences, perHolding := handoffRun(t, srv.Addr(), false)
	if len(fences) != 200 {
		t.Fatalf("%d holdings, want 200", len(fences))
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("holding %d got fence %d after %d: every holding, handed off or not, needs a greater fence", i, fences[i], fences[i-1])
		}
	}
	// A delayed write of an earlier holder is rejected by the fenced register.
	if err := redisstore.SetFenced(testCtx(t), rdb, "resource", "stale", fences[len(fences)-2]); !errors.Is(err, dlock.ErrStaleFence) {
		t.Fatalf("stale write after handoffs = %v, want ErrStaleFence", err)
	}
	// Without handoff each holding costs an acquire and a release at least.
	_, without := handoffRun(t, srv.Addr(), true)
	t.Logf("round trips per holding: %.2f with handoff, %.2f without", perHolding, without)
	if without < 2 {
		t.Fatalf("control without handoff: %.2f round trips per holding, want ≥ 2 (is the counter broken?)", without)
	}
	if perHolding >= 1.5 {
		t.Fatalf("with handoff: %.2f round trips per holding, want < 1.5", perHolding)
	}
}
