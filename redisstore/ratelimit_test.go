package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// Tests of the rate limiter's Redis layout; its rules are checked by the
// conformance suite (TestConformance/RateLimiter/...).

// TestRateKeyLayout: the TAT lives at PREFIX{K}:rate (the store's
// prefix), in K's slot, expiring with the TAT; a denied call writes
// nothing (value and expiry unchanged); a foreign value (a string that
// is not a number, a hash) is refused and left; a key starting with '}' is refused before any I/O.
func TestRateKeyLayout(t *testing.T) {
	srv, rdb := newRedis(t)
	s, err := redisstore.New(rdb, &redisstore.Options{Prefix: "app:"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	lim := driver.RateLimit{Rate: 1, Period: time.Minute, Burst: 2}
	if _, err := s.AllowN(ctx, "}x", lim, 1); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("AllowN(\"}x\") = %v, want ErrInvalid", err)
	}
	if n, _ := srv.Do("DBSIZE"); n != "0" {
		t.Fatalf("DBSIZE = %s after a rejected key", n)
	}
	k := s.RateKey("k")
	if k != "app:{k}:rate" {
		t.Fatalf("RateKey = %q, want app:{k}:rate", k)
	}
	r, err := s.AllowN(ctx, "k", lim, 2)
	if err != nil || r.Allowed != 2 {
		t.Fatalf("AllowN(2) = %+v, %v", r, err)
	}
	v1, _ := rdb.Get(ctx, k).Result()
	ttl1, _ := rdb.PTTL(ctx, k).Result()
	if ttl1 <= r.ResetAfter-time.Second || ttl1 > r.ResetAfter+time.Millisecond {
		t.Fatalf("PTTL %v, want the ResetAfter %v rounded up to a ms", ttl1, r.ResetAfter)
	}
	if r, err := s.AllowN(ctx, "k", lim, 1); err != nil || r.Allowed != 0 {
		t.Fatalf("over the burst: %+v, %v", r, err)
	}
	v2, _ := rdb.Get(ctx, k).Result()
	ttl2, _ := rdb.PTTL(ctx, k).Result()
	if v2 != v1 || ttl2 > ttl1 {
		t.Fatalf("a denied call changed the key: %q, PTTL %v, then %q, PTTL %v", v1, ttl1, v2, ttl2)
	}
	if err := rdb.Set(ctx, s.RateKey("foreign"), "not a TAT", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllowN(ctx, "foreign", lim, 1); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("AllowN over a string = %v, want ErrRefused", err)
	}
	if v, _ := rdb.Get(ctx, s.RateKey("foreign")).Result(); v != "not a TAT" {
		t.Fatalf("the foreign string became %q", v)
	}
	if err := rdb.HSet(ctx, s.RateKey("hash"), "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllowN(ctx, "hash", lim, 1); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("AllowN over a hash = %v, want ErrRefused", err)
	}
	if typ, _ := rdb.Type(ctx, s.RateKey("hash")).Result(); typ != "hash" {
		t.Fatalf("the foreign hash became a %s", typ)
	}
}

// TestRateKeySharesTheLocksSlot, on a real Cluster: a limiter key is in the
// slot of the lock of the same name (one key, one slot, no CROSSSLOT).
func TestRateKeySharesTheLocksSlot(t *testing.T) {
	_, rdb := newCluster(t)
	s := newStore(t, rdb)
	for _, key := range []string{"a", "a}b", "x{y}z", "ünï"} {
		lock, _ := s.Keys(key)
		want, err := rdb.ClusterKeySlot(testCtx(t), lock).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT: %v", err)
		}
		if got, _ := rdb.ClusterKeySlot(testCtx(t), s.RateKey(key)).Result(); got != want {
			t.Fatalf("key %q: %s is in slot %d, the lock in %d", key, s.RateKey(key), got, want)
		}
	}
}
