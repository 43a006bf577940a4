package etcdstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
)

var _ driver.SessionKeeper = (*etcdstore.Store)(nil)

// TestKeepAliveKeepsTheSession: a holder that calls only KeepAlive (the
// driver.SessionKeeper; no Extend) keeps its key for three session TTLs;
// the control, a holder of another store that does nothing, loses its key
// within the TTL: a third store takes it.
func TestKeepAliveKeepsTheSession(t *testing.T) {
	const ttl = 2 * time.Second // MinSessionTTL
	c := node(t)
	ctx := ctxT(t, 30*time.Second)
	pfx := uniq(t)
	kept, _ := newStore(t, c, pfx, ttl)
	idle, _ := newStore(t, c, pfx, ttl)
	other, _ := newStore(t, c, pfx, 10*time.Second)
	a, b := tok(), tok()
	if _, err := kept.Acquire(ctx, "kept", a, ttl); err != nil {
		t.Fatal(err)
	}
	if _, err := idle.Acquire(ctx, "idle", b, ttl); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); time.Sleep(ttl / 4) {
		if err := kept.KeepAlive(ctx); err != nil {
			t.Fatalf("KeepAlive: %v", err)
		}
	}
	var ce *driver.ContendedError
	if _, err := other.Acquire(ctx, "kept", tok(), ttl); !errors.As(err, &ce) {
		t.Errorf("Acquire of the kept key by another store = %v, want contended", err)
	}
	if _, err := kept.Extend(ctx, "kept", a, ttl); err != nil {
		t.Errorf("Extend of the kept key = %v, want held", err)
	}
	if _, err := other.Acquire(ctx, "idle", tok(), ttl); err != nil { // control
		t.Errorf("Acquire of the idle holder's key = %v, want it free (the session expired)", err)
	}
	if err := idle.KeepAlive(ctx); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("KeepAlive of the expired session = %v, want ErrNotHeld", err)
	}
}
