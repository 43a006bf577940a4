package redisstore_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/redisstore"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	if os.Getenv(rateChildEnv) != "" {
		os.Exit(runRateChild())
	}
	goleak.VerifyTestMain(m)
}

// newRedis starts a real redis-server for the test and returns a client.
func newRedis(t *testing.T) (*redisserver.Server, *redis.Client) {
	t.Helper()
	srv := redisserver.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return srv, rdb
}

func newStore(t *testing.T, rdb redis.UniversalClient) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newClient(t *testing.T, rdb redis.UniversalClient, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	c, err := dlock.New(newStore(t, rdb), opts...)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	return c
}

// testCtx is the shared test context (internal/testkit).
var testCtx = testkit.Ctx

func TestConformance(t *testing.T) {
	srv, _ := newRedis(t)
	drivertest.Run(t, singleHarness(srv))
}

// newShortStore is newStore with a short retention, so that the bounded
// state case of the conformance suite does not wait 30 s.
func newShortStore(t *testing.T, rdb redis.UniversalClient) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(rdb, &redisstore.Options{Retention: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// stateStore reports a lock's Redis keys for drivertest.StateReporter:
// every key under the lock's hash tag, and the idempotency records of the
// key in any scope, on every primary.
type stateStore struct {
	*redisstore.Store
	rdb redis.UniversalClient
}

func (s stateStore) KeyState(ctx context.Context, key string) (int, error) {
	lock, _ := s.Keys(key)
	rec := s.RecordKey(driver.RecordID{Key: key}) // PREFIX idem:{<scope>:<key>}, any scope
	i := strings.Index(rec, "{") + 1
	return keyState(ctx, s.rdb, globEscaper.Replace(lock)+"*", globEscaper.Replace(rec[:i])+"*"+globEscaper.Replace(rec[i:]))
}

// keyState counts the Redis keys that match any of the glob patterns, on
// every primary.
func keyState(ctx context.Context, rdb redis.UniversalClient, matches ...string) (int, error) {
	count := func(ctx context.Context, c *redis.Client) (int, error) {
		n := 0
		for _, match := range matches {
			keys, err := c.Keys(ctx, match).Result()
			if err != nil {
				return 0, err
			}
			n += len(keys)
		}
		return n, nil
	}
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return count(ctx, rdb.(*redis.Client))
	}
	var n atomic.Int64
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		k, err := count(ctx, c)
		n.Add(int64(k))
		return err
	})
	return int(n.Load()), err
}

var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

func TestNewRejectsNilClient(t *testing.T) {
	if _, err := redisstore.New(nil, nil); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("New(nil) = %v, want ErrInvalid", err)
	}
}

func TestKeyStartingWithBraceIsRejectedBeforeIO(t *testing.T) {
	srv, rdb := newRedis(t)
	s := newStore(t, rdb)
	if _, err := s.Acquire(testCtx(t), "}x", "tok", time.Second); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("Acquire(\"}x\") = %v, want ErrInvalid", err)
	}
	if n, _ := srv.Do("DBSIZE"); n != "0" {
		t.Fatalf("DBSIZE = %s after a rejected key", n)
	}
}

func TestAllKeysOfALockShareOneSlot(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	for _, key := range []string{"a", "a}b", "x{y}z", "stock:10000", "ünï"} {
		lock, fence := s.Keys(key)
		ls, err := rdb.ClusterKeySlot(testCtx(t), lock).Result()
		if err != nil {
			t.Skipf("CLUSTER KEYSLOT unavailable: %v", err)
		}
		fs, _ := rdb.ClusterKeySlot(testCtx(t), fence).Result()
		cs, _ := rdb.ClusterKeySlot(testCtx(t), lock+":released").Result()
		if ls != fs || ls != cs {
			t.Fatalf("key %q: slots %d/%d/%d differ", key, ls, fs, cs)
		}
	}
}

func TestInspectReportsHolder(t *testing.T) {
	_, rdb := newRedis(t)
	c := newClient(t, rdb)
	s := c.Store().(driver.Inspector)
	l, err := c.Lock(testCtx(t), "inspect", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Inspect(testCtx(t), "inspect")
	if err != nil || !info.Held || info.Token != l.Token() || info.Holds != 1 || info.Fence != l.Fence() ||
		info.Remaining <= 50*time.Second {
		t.Fatalf("Inspect = %+v, %v", info, err)
	}
	if err := l.Release(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	info, err = s.Inspect(testCtx(t), "inspect")
	if err != nil || info.Held || info.Fence != l.Fence() {
		t.Fatalf("Inspect after release = %+v, %v", info, err)
	}
}

func TestExtendBatchSurvivesScriptFlush(t *testing.T) {
	srv, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	var reqs []driver.ExtendRequest
	for _, k := range []string{"b1", "b2", "b3"} {
		if _, err := s.Acquire(ctx, k, "tok", time.Second); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, driver.ExtendRequest{Key: k, Token: "tok", TTL: time.Minute})
	}
	reqs = append(reqs, driver.ExtendRequest{Key: "b1", Token: "other", TTL: time.Minute})
	if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	res := s.ExtendBatch(ctx, reqs)
	for i, r := range res[:3] {
		if r.Err != nil || r.Grant.Holds != 1 {
			t.Fatalf("batch item %d: %+v", i, r)
		}
	}
	if !errors.Is(res[3].Err, dlock.ErrTaken) {
		t.Fatalf("non-owner batch item: %v", res[3].Err)
	}
	if ttl, _ := rdb.PTTL(ctx, "dlock:{b2}").Result(); ttl < 50*time.Second {
		t.Fatalf("PTTL after batch extend = %v", ttl)
	}
}

func TestSetFencedRejectsStaleWrites(t *testing.T) {
	_, rdb := newRedis(t)
	ctx := testCtx(t)
	if err := redisstore.SetFenced(ctx, rdb, "res", "v7", 7); err != nil {
		t.Fatal(err)
	}
	if err := redisstore.SetFenced(ctx, rdb, "res", "v6", 6); !errors.Is(err, dlock.ErrStaleFence) {
		t.Fatalf("stale write: %v", err)
	}
	if err := redisstore.SetFenced(ctx, rdb, "res", "v7b", 7); err != nil {
		t.Fatalf("same fence again: %v", err)
	}
	v, f, err := redisstore.GetFenced(ctx, rdb, "res")
	if v != "v7b" || f != 7 || err != nil {
		t.Fatalf("GetFenced = %q, %d, %v", v, f, err)
	}
}
