package dlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// store returns a store on its own connection pool, through the proxy if
// viaProxy (the holder whose network a test cuts) or straight to the server.
// Calls honour their context's deadline and are never retried by go-redis
// (a replay would blur what a test measures); see redisStore.
func (e *redisEnv) store(t *testing.T, viaProxy bool) *redisstore.Store {
	t.Helper()
	addr := e.srv.Addr()
	if viaProxy {
		addr = e.proxy.Addr()
		t.Cleanup(e.proxy.Clear) // a blackholed connection would hold up the close
	}
	return redisStore(t, addr)
}

// client returns a Client on a new store, wrapped by hook if not nil.
func (e *redisEnv) client(t *testing.T, viaProxy bool, hook *extendHook, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	var st driver.Mutex = e.store(t, viaProxy)
	if hook != nil {
		hook.Mutex = st
		st = hook
	}
	c, err := dlock.New(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, c)
	return c
}

// extendHook wraps a store, counts Extend calls and can make those of one
// key hang until their context ends, as a call whose reply never comes;
// started and ended are closed when the first such call starts and ends.
// It is deliberately not a BatchExtender, and has no Unwrap (the wrapped
// store's BatchExtender would bypass the hook): the renewer then calls
// Extend once per lease of a batch.
type extendHook struct {
	driver.Mutex
	hangKey        string
	extends        atomic.Int64
	hung           atomic.Int64
	started, ended chan struct{}
}

func newExtendHook(hangKey string) *extendHook {
	return &extendHook{hangKey: hangKey, started: make(chan struct{}), ended: make(chan struct{})}
}

func (h *extendHook) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
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
		return driver.Grant{}, ctx.Err()
	}
	return h.Mutex.Extend(ctx, key, token, ttl)
}

// waitFor calls cond every interval until it returns true, and fails the
// test if that does not happen within limit.
func waitFor(t *testing.T, limit, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		<-time.After(interval)
	}
}
