package inventory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/redisstore"
)

// The library's own Redis store must pass the conformance suite on the
// embedded server, or the demo's `dlock` column would prove nothing.
func TestRedisstoreConformanceOnEmbedded(t *testing.T) {
	e, err := StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	rdb := redis.NewClient(&redis.Options{Addr: e.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	drivertest.Run(t, drivertest.Harness{New: func(t *testing.T) driver.Store {
		s, err := redisstore.New(rdb, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}})
}

// The parts of redisstore outside the Store contract: the renewal pipeline
// after the server lost its scripts (EVALSHA → NOSCRIPT → reload), and the
// fenced register (multi-field HSET inside a script).
func TestRedisstoreExtrasOnEmbedded(t *testing.T) {
	e, err := StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	rdb := redis.NewClient(&redis.Options{Addr: e.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := redisstore.New(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	var reqs []driver.ExtendRequest
	for _, k := range []string{"b1", "b2"} {
		if _, err := s.Acquire(ctx, k, "tok", time.Second); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, driver.ExtendRequest{Key: k, Token: "tok", TTL: time.Minute})
	}
	reqs = append(reqs, driver.ExtendRequest{Key: "b1", Token: "other", TTL: time.Minute})
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	res := s.ExtendBatch(ctx, reqs)
	if res[0].Err != nil || res[1].Err != nil || !errors.Is(res[2].Err, dlock.ErrTaken) {
		t.Fatalf("batch: %+v", res)
	}
	if ttl, _ := rdb.PTTL(ctx, "dlock:{b2}").Result(); ttl < 50*time.Second {
		t.Fatalf("PTTL after batch extend = %v", ttl)
	}
	if err := redisstore.SetFenced(ctx, rdb, "res", "v7", 7); err != nil {
		t.Fatal(err)
	}
	if err := redisstore.SetFenced(ctx, rdb, "res", "v6", 6); !errors.Is(err, dlock.ErrStaleFence) {
		t.Fatalf("stale write: %v", err)
	}
	if v, f, err := redisstore.GetFenced(ctx, rdb, "res"); v != "v7" || f != 7 || err != nil {
		t.Fatalf("GetFenced = %q, %d, %v", v, f, err)
	}
}
