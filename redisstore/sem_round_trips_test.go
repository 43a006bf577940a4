package redisstore_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

// TestPermitRoundTrips: an uncontended AcquirePermits + ReleasePermits is
// two round trips (a script each), and ExtendPermitsBatch renews 8
// holdings in one, a request that fails its checks or names a holding that
// is gone getting its own error in the same batch. Control: renewing the
// same 8 holdings with ExtendPermits takes 8 round trips, so the counter
// sees each call. Counted with a go-redis hook (a pipeline counts once).
func TestPermitRoundTrips(t *testing.T) {
	_, direct := newRedis(t)
	var rc roundTripCounter
	rdb := redis.NewClient(&redis.Options{Addr: direct.Options().Addr, MaxRetries: -1})
	rdb.AddHook(&rc)
	t.Cleanup(func() { _ = rdb.Close() })
	s := newStore(t, rdb)
	ctx := testCtx(t)
	const ttl = time.Minute
	cycle := func(key, tok string) {
		if _, err := s.AcquirePermits(ctx, key, tok, 8, 1, ttl); err != nil {
			t.Fatal(err)
		}
		if err := s.ReleasePermits(ctx, key, tok); err != nil {
			t.Fatal(err)
		}
	}
	cycle("warm", "w") // loads the scripts: a NOSCRIPT fallback costs a trip
	t0 := rc.trips.Load()
	const cycles = 20
	for i := range cycles {
		cycle("sem", "t"+strconv.Itoa(i))
	}
	if got := rc.trips.Load() - t0; got != 2*cycles {
		t.Fatalf("%d uncontended acquire+release cycles took %d round trips, want %d", cycles, got, 2*cycles)
	}

	reqs := make([]driver.ExtendRequest, 8)
	fences := make([]uint64, 8)
	for i := range reqs {
		reqs[i] = driver.ExtendRequest{Key: "k" + strconv.Itoa(i), Token: "tok", TTL: ttl}
		g, err := s.AcquirePermits(ctx, reqs[i].Key, "tok", 2, 1, ttl)
		if err != nil {
			t.Fatal(err)
		}
		fences[i] = g.Fence
	}
	_ = s.ExtendPermitsBatch(ctx, reqs) // loads the extend script
	t0, c0 := rc.trips.Load(), rc.cmds.Load()
	res := s.ExtendPermitsBatch(ctx, append(reqs, driver.ExtendRequest{Key: "k0", Token: "gone", TTL: ttl}, driver.ExtendRequest{Key: "k0", Token: "tok"}))
	if trips, cmds := rc.trips.Load()-t0, rc.cmds.Load()-c0; trips != 1 || cmds != 9 {
		t.Fatalf("batch of 8 holdings, one not held and one invalid: %d round trips carrying %d commands, want 1 and 9", trips, cmds)
	}
	for i, r := range res[:8] {
		if r.Err != nil || r.Grant.Fence != fences[i] || r.Grant.Holds != 1 || r.Grant.TTL != ttl {
			t.Fatalf("batch result %d: %+v, want fence %d, 1 permit, %v", i, r, fences[i], ttl)
		}
	}
	if err := res[8].Err; !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("batch result for a token holding nothing: %v, want ErrExpired", err)
	}
	if err := res[9].Err; !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("batch result with no TTL: %v, want ErrInvalid", err)
	}

	t0 = rc.trips.Load()
	for _, r := range reqs {
		if _, err := s.ExtendPermits(ctx, r.Key, r.Token, r.TTL); err != nil {
			t.Fatal(err)
		}
	}
	if got := rc.trips.Load() - t0; got != int64(len(reqs)) {
		t.Fatalf("control: %d ExtendPermits took %d round trips, want one each", len(reqs), got)
	}
}
