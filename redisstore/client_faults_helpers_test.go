package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/internal/testkit/clienttest"
	"example.com/dlock/redisstore"
)

// The Client's behaviour under faults only a real redis-server produces (a
// paused server, a deleted key, a refused dial) or the TCP fault proxy
// does (a held, delayed or blackholed reply): the tests that were the root
// package's regression tests of issue 13 and 23, moved here so that the
// root package's own tests need no server. What the Client does with a
// fault a store wrapper can produce is tested in the root, on memstore.

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
// and does not retry on its own (a replay would blur what a test measures).
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

// redisClient returns a dlock Client over a new connection to addr, warmed
// up. The test's cleanup closes it (waiting for its background releases)
// before the store.
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
	ctx := testkit.Ctx(t)
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
	info, err := e.direct.Inspect(testkit.Ctx(t), key)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", key, err)
	}
	return info.Held
}

// client returns a Client on a new store, through the proxy if viaProxy
// (the holder whose network a test cuts) or straight to the server,
// wrapped by hook if not nil.
func (e *redisEnv) client(t *testing.T, viaProxy bool, hook *clienttest.ExtendHook, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	addr := e.srv.Addr()
	if viaProxy {
		addr = e.proxy.Addr()
		t.Cleanup(e.proxy.Clear) // a blackholed connection would hold up the close
	}
	var st driver.Mutex = redisStore(t, addr)
	if hook != nil {
		hook.Mutex = st
		st = hook
	}
	return clienttest.NewClient(t, st, opts...)
}
