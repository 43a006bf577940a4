package dlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/chaos/faultproxy"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"
)

// redisFixture is a real redis-server for this package's safety tests, with
// a fault proxy in front of it. Clients made with viaProxy go through the
// proxy (the holder whose network a test cuts); the others connect directly.
type redisFixture struct {
	srv   *redisserver.Server
	proxy *faultproxy.Proxy
}

func startRedis(t *testing.T) *redisFixture {
	t.Helper()
	srv := redisserver.Start(t)
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &redisFixture{srv: srv, proxy: p}
}

// store returns a redisstore on its own connection pool. Calls honour their
// context's deadline (so a blackholed call ends with it) and are never
// retried by go-redis (a replay would blur what a test measures).
func (f *redisFixture) store(t *testing.T, viaProxy bool) *redisstore.Store {
	t.Helper()
	addr := f.srv.Addr()
	if viaProxy {
		addr = f.proxy.Addr()
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	s, err := redisstore.New(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.proxy.Clear() // a blackholed connection would hold up the close
		_ = s.Close()
		_ = rdb.Close()
	})
	return s
}

// client returns a Client on a new store, wrapped by hook if not nil.
func (f *redisFixture) client(t *testing.T, viaProxy bool, hook *extendHook, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	var st dlock.Store = f.store(t, viaProxy)
	if hook != nil {
		hook.Store = st
		st = hook
	}
	c, err := dlock.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// extendHook wraps a store, counts Extend calls and can make those of one
// key hang until their context ends, as a call whose reply never comes;
// started and ended are closed when the first such call starts and ends.
// It is deliberately not a BatchExtender: the renewer then calls Extend
// once per lease of a batch.
type extendHook struct {
	dlock.Store
	hangKey        string
	extends        atomic.Int64
	hung           atomic.Int64
	started, ended chan struct{}
}

func newExtendHook(hangKey string) *extendHook {
	return &extendHook{hangKey: hangKey, started: make(chan struct{}), ended: make(chan struct{})}
}

func (h *extendHook) Extend(ctx context.Context, key, token string, ttl time.Duration) (dlock.Grant, error) {
	h.extends.Add(1)
	if key == h.hangKey && h.hangKey != "" {
		first := h.hung.Add(1) == 1
		if first {
			close(h.started)
		}
		<-ctx.Done()
		if first {
			close(h.ended)
		}
		return dlock.Grant{}, ctx.Err()
	}
	return h.Store.Extend(ctx, key, token, ttl)
}

// pollUntil calls cond every interval until it returns true, and fails the
// test if that does not happen within limit.
func pollUntil(t *testing.T, limit, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		<-time.After(interval)
	}
}
