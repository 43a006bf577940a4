package zkstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/zkstore"
)

var _ driver.SessionKeeper = (*zkstore.Store)(nil)

// TestKeepAliveKeepsTheSession: a holder that calls only KeepAlive (the
// driver.SessionKeeper; no Extend) keeps its key for two session timeouts.
// go-zookeeper also pings the server by itself, so the control cuts a
// holder off instead (its proxy drops everything: neither KeepAlive nor
// the pings reach the server) for the same time: its KeepAlive fails, and
// its key is lost (another store takes it).
func TestKeepAliveKeepsTheSession(t *testing.T) {
	const timeout = 4 * time.Second
	root := uniq(t)
	addr := server(t).Addrs()[0]
	kept, cut := dialProxied(t, root, timeout, addr), dialProxied(t, root, timeout, addr)
	other := dial(t, root, timeout, addr)
	ctx := ctxT(t, 40*time.Second)
	a := tok()
	if _, err := kept.Acquire(ctx, "kept", a, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := cut.Acquire(ctx, "cut", tok(), 0); err != nil {
		t.Fatal(err)
	}
	cut.p.Blackhole(faultproxy.Upstream, true)
	cut.p.Blackhole(faultproxy.Downstream, true)
	for end := time.Now().Add(2 * timeout); time.Now().Before(end); time.Sleep(timeout / 4) {
		if err := kept.KeepAlive(ctx); err != nil {
			t.Fatalf("KeepAlive: %v", err)
		}
	}
	var ce *driver.ContendedError
	if _, err := other.Acquire(ctx, "kept", tok(), 0); !errors.As(err, &ce) {
		t.Errorf("Acquire of the kept key by another store = %v, want contended", err)
	}
	if _, err := kept.Extend(ctx, "kept", a, 0); err != nil {
		t.Errorf("Extend of the kept key = %v, want held", err)
	}
	kctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := cut.KeepAlive(kctx); err == nil { // control
		t.Error("KeepAlive of the cut-off holder = nil, want an error")
	}
	if _, err := other.Acquire(ctx, "cut", tok(), 0); err != nil {
		t.Errorf("Acquire of the cut-off holder's key = %v, want it free (the session expired)", err)
	}
}
