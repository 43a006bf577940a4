package zkstore_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/internal/faultproxy"
)

// TestGrantTTLIsTheCertainPart: a grant and an Extend report how long the
// session is certain to last from the start of the call: from the send
// time of its confirming request (a write or a sync, sent during the
// call), the timeout less the margin (a quarter). So at least that, and
// more by at most the time the call took. KeepAlive confirms the session;
// cut off from the server, it confirms nothing and says so.
func TestGrantTTLIsTheCertainPart(t *testing.T) {
	const timeout = 4 * time.Second
	certain := timeout - timeout/4
	c := dialProxied(t, uniq(t), timeout, server(t).Addrs()[0])
	ctx := ctxT(t, 20*time.Second)
	token := tok()
	check := func(what string, ttl time.Duration, took time.Duration) {
		t.Helper()
		if ttl < certain || ttl > certain+took {
			t.Errorf("%s: TTL %v, want in [%v, %v] (the call took %v)", what, ttl, certain, certain+took, took)
		}
	}
	start := time.Now()
	g, err := c.Acquire(ctx, "k", token, 0)
	if err != nil {
		t.Fatal(err)
	}
	check("Acquire", g.TTL, time.Since(start))
	start = time.Now()
	e, err := c.Extend(ctx, "k", token, 0)
	if err != nil {
		t.Fatal(err)
	}
	check("Extend", e.TTL, time.Since(start))
	if err := c.KeepAlive(ctx); err != nil {
		t.Fatal(err)
	}

	c.p.Blackhole(faultproxy.Upstream, true)
	kctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := c.KeepAlive(kctx); err == nil {
		t.Fatal("KeepAlive while cut off = nil")
	}
}
