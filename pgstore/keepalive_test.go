package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
)

// TestSessionKeepAliveKeepsTheSession: on connections the server ends after
// a second idle (idle_session_timeout), a holder that calls only KeepAlive
// (the driver.SessionKeeper; no Extend) keeps its key for three seconds,
// past the session TTL (CheckInterval, 1 s); the control, a holder that
// does nothing, loses its key when the server ends its idle connection: a
// third store takes it.
func TestSessionKeepAliveKeepsTheSession(t *testing.T) {
	srv := sessServer(t)
	idleURL := srv.URL() + "&idle_session_timeout=1000"
	opts := pgstore.SessionOptions{CheckInterval: time.Second}
	kept := newSession(t, sessPool(t, idleURL, 4), opts)
	idle := newSession(t, sessPool(t, idleURL, 4), opts)
	other := newSession(t, sessPool(t, srv.URL(), 4), opts)
	c := ctx(t)
	a := tok()
	if _, err := kept.Acquire(c, "kept", a, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := idle.Acquire(c, "idle", tok(), time.Second); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		if err := kept.KeepAlive(c); err != nil {
			t.Fatalf("KeepAlive: %v", err)
		}
	}
	var ce *driver.ContendedError
	if _, err := other.Acquire(c, "kept", tok(), time.Second); !errors.As(err, &ce) {
		t.Errorf("Acquire of the kept key by another store = %v, want contended", err)
	}
	if _, err := kept.Extend(c, "kept", a, time.Second); err != nil {
		t.Errorf("Extend of the kept key = %v, want held", err)
	}
	if _, err := other.Acquire(c, "idle", tok(), time.Second); err != nil { // control
		t.Errorf("Acquire of the idle holder's key = %v, want it free (the server ended its connection)", err)
	}
}
