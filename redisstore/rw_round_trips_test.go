package redisstore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

// TestRWRoundTrips: an uncontended read cycle (AcquireRead + ReleaseRW)
// and a write cycle are two round trips each, and ExtendRWBatch renews 8
// holdings, reads and writes, in one. Control: renewing the same 8 with
// ExtendRW takes 8 round trips, so the counter sees each call. Counted
// with a go-redis hook (a pipeline counts once).
func TestRWRoundTrips(t *testing.T) {
	_, direct := newRedis(t)
	var rc roundTripCounter
	rdb := redis.NewClient(&redis.Options{Addr: direct.Options().Addr, MaxRetries: -1})
	rdb.AddHook(&rc)
	t.Cleanup(func() { _ = rdb.Close() })
	s := newStore(t, rdb)
	ctx := testCtx(t)
	const ttl = time.Minute
	acquire := []func(key, tok string) (driver.RWGrant, error){
		func(key, tok string) (driver.RWGrant, error) { return s.AcquireRead(ctx, key, tok, ttl) },
		func(key, tok string) (driver.RWGrant, error) { return s.AcquireWrite(ctx, key, tok, ttl) },
	}
	cycle := func(i int, key, tok string) {
		if _, err := acquire[i%2](key, tok); err != nil {
			t.Fatal(err)
		}
		if err := s.ReleaseRW(ctx, key, tok); err != nil {
			t.Fatal(err)
		}
	}
	cycle(0, "warm", "r") // loads the scripts: a NOSCRIPT fallback costs a trip
	cycle(1, "warm", "w")
	t0 := rc.trips.Load()
	const cycles = 20
	for i := range cycles {
		cycle(i, "rw", "t"+strconv.Itoa(i))
	}
	if got := rc.trips.Load() - t0; got != 2*cycles {
		t.Fatalf("%d uncontended read or write cycles took %d round trips, want %d", cycles, got, 2*cycles)
	}

	reqs := make([]driver.ExtendRequest, 8) // 4 readers of "r", then 4 writers of keys of their own
	for i := range reqs {
		reqs[i] = driver.ExtendRequest{Key: "r", Token: "tok" + strconv.Itoa(i), TTL: ttl}
		if i >= 4 {
			reqs[i].Key = "w" + strconv.Itoa(i)
		}
		if _, err := acquire[i/4](reqs[i].Key, reqs[i].Token); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.ExtendRWBatch(ctx, reqs) // loads the extend script
	t0 = rc.trips.Load()
	for i, r := range s.ExtendRWBatch(ctx, reqs) {
		if r.Err != nil || r.Grant.Holds != 1 || r.Grant.Fence == 0 {
			t.Fatalf("batch result %d: %+v", i, r)
		}
	}
	if trips := rc.trips.Load() - t0; trips != 1 {
		t.Fatalf("batch of 8 holdings: %d round trips, want 1", trips)
	}
	t0 = rc.trips.Load()
	for _, r := range reqs {
		if _, err := s.ExtendRW(ctx, r.Key, r.Token, r.TTL); err != nil {
			t.Fatal(err)
		}
	}
	if got := rc.trips.Load() - t0; got != int64(len(reqs)) {
		t.Fatalf("control: %d ExtendRW took %d round trips, want one each", len(reqs), got)
	}
}
