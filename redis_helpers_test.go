package dlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"
)

// The root package's tests against a real redis-server: one helper set,
// shared by the regression tests of issue 13 (client_*_test.go).

// redisEnv is a real redis-server, a direct client to inspect it, and
// optionally a fault proxy in front of it.
type redisEnv struct {
	srv    *redisserver.Server
	direct *redisstore.Store // through no proxy: for checking the key's state
	proxy  *faultproxy.Proxy // nil unless withProxy
}

// startRedis starts a redis-server for t (and a fault proxy in front of it
// if withProxy).
func startRedis(t *testing.T, withProxy bool) *redisEnv {
	t.Helper()
	e := &redisEnv{srv: redisserver.Start(t)}
	e.direct = redisStore(t, e.srv.Addr())
	if withProxy {
		p, err := faultproxy.New(e.srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		e.proxy = p
	}
	return e
}

// addr is where the clients under test connect: the proxy if there is one.
func (e *redisEnv) addr() string {
	if e.proxy != nil {
		return e.proxy.Addr()
	}
	return e.srv.Addr()
}

// redisStore returns a store over a go-redis client that honours context
// deadlines on the wire (ContextTimeoutEnabled, as the reports used)
// and does not retry on its own.
func redisStore(t *testing.T, addr string) *redisstore.Store {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
	})
	s, err := redisstore.New(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: the store closes before its client.
	t.Cleanup(func() { _ = rdb.Close() })
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// redisClient returns a dlock Client over a new connection to addr. The
// test's cleanup closes it (waiting for its background releases) before
// the store.
func redisClient(t *testing.T, addr string, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	c, err := dlock.New(redisStore(t, addr), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	warm(t, c)
	return c
}

// warm makes one lock and release, so that the connection is open and the
// scripts are loaded before a fault is injected.
func warm(t *testing.T, c *dlock.Client) {
	t.Helper()
	ctx := testCtx(t)
	l, err := c.Lock(ctx, "warm-up", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("warm-up Lock: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("warm-up Release: %v", err)
	}
}

// held reports whether key is held in the store, asking directly.
func (e *redisEnv) held(t *testing.T, key string) bool {
	t.Helper()
	info, err := e.direct.Inspect(testCtx(t), key)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", key, err)
	}
	return info.Held
}

// pollUntil polls cond every 5 ms for at most d; it reports whether cond
// became true and how long that took.
func pollUntil(d time.Duration, cond func() bool) (bool, time.Duration) {
	start := time.Now()
	for time.Since(start) < d {
		if cond() {
			return true, time.Since(start)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
	return cond(), time.Since(start)
}
