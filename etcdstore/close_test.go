package etcdstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestCloseDoc pins Close's doc comment: the session is revoked (the
// store's keys go at once, not at the session's expiry), later calls that
// create a session (Acquire, AcquireQueued) fail with ErrInvalid and write
// nothing, KeepAlive has no session to renew (nil), Extend and Release
// find the holding gone (NotHeld), and
// the etcd client stays open. The control is the store before Close: the
// same Acquire succeeds.
func TestCloseDoc(t *testing.T) {
	c := node(t)
	ctx := ctxT(t, 30*time.Second)
	pfx := uniq(t)
	s, cli := newStore(t, c, pfx, 10*time.Second)
	a := tok()
	if _, err := s.Acquire(ctx, "k", a, time.Second); err != nil { // control
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("the etcd client was closed with the store: %v", err)
	}
	if resp.Count != 0 {
		t.Fatalf("Close left %d keys: the session was not revoked", resp.Count)
	}
	if _, err := s.Acquire(ctx, "k2", tok(), time.Second); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Acquire after Close = %v, want ErrInvalid", err)
	}
	if _, err := s.AcquireQueued(ctx, "k2", tok(), time.Second); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("AcquireQueued after Close = %v, want ErrInvalid", err)
	}
	if err := s.KeepAlive(ctx); err != nil {
		t.Errorf("KeepAlive after Close = %v, want nil (no session)", err)
	}
	if _, err := s.Extend(ctx, "k", a, time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Extend after Close = %v, want ErrNotHeld", err)
	}
	if err := s.Release(ctx, "k", a); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release after Close = %v, want ErrNotHeld", err)
	}
	if _, err := s.Transfer(ctx, "k", a, tok(), time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Transfer after Close = %v, want ErrNotHeld", err)
	}
	if _, _, err := s.Apply(ctx, driver.Step{Action: driver.Acquire, Key: "k3", Token: tok(), TTL: time.Second}); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Apply(Acquire) after Close = %v, want ErrInvalid", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if resp, err := cli.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("calls after Close wrote %v keys (%v)", resp.Count, err)
	}
}
