package mysqlstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/mysqlstore"
)

// TestSessionKeepAliveKeepsTheSession: on connections the server ends after
// a second idle (wait_timeout=1), a holder that calls only KeepAlive (the
// driver.SessionKeeper; no Extend) keeps its key for three seconds, past
// the session TTL (CheckEvery, 1 s); the control, a holder that does
// nothing, loses its key when the server ends its idle connection: a third
// store takes it, and the holder's KeepAlive then reports the loss.
func TestSessionKeepAliveKeepsTheSession(t *testing.T) {
	_, opts := migrated(t, mysqlstore.Options{})
	so := mysqlstore.SessionOptions{Table: opts.Table, CheckEvery: time.Second}
	session := func(params ...string) *mysqlstore.Session {
		s, err := mysqlstore.NewSession(openDB(t, shared(t).DSN(params...)), so)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	kept, idle, other := session("wait_timeout=1"), session("wait_timeout=1"), session()
	c := ctxT(t)
	a := drivertest.Token()
	if _, err := kept.Acquire(c, "kept", a, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := idle.Acquire(c, "idle", drivertest.Token(), time.Second); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		if err := kept.KeepAlive(c); err != nil {
			t.Fatalf("KeepAlive: %v", err)
		}
	}
	var ce *driver.ContendedError
	if _, err := other.Acquire(c, "kept", drivertest.Token(), time.Second); !errors.As(err, &ce) {
		t.Errorf("Acquire of the kept key by another store = %v, want contended", err)
	}
	if _, err := kept.Extend(c, "kept", a, time.Second); err != nil {
		t.Errorf("Extend of the kept key = %v, want held", err)
	}
	if _, err := other.Acquire(c, "idle", drivertest.Token(), time.Second); err != nil { // control
		t.Errorf("Acquire of the idle holder's key = %v, want it free (the server ended its connection)", err)
	}
	if err := idle.KeepAlive(c); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("KeepAlive of the ended connection = %v, want ErrNotHeld", err)
	}
	if err := idle.KeepAlive(c); err != nil {
		t.Errorf("KeepAlive with nothing held = %v, want nil", err)
	}
}
