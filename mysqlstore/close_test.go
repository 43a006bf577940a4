package mysqlstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestSessionCloseDoc pins Session.Close's doc comment: the held lock is
// released (another Session takes it as soon as the server has processed
// the disconnect, well within 2 s), later calls fail with
// ErrInvalid, and the pool stays open. The control is the other Session's
// Acquire before Close, which is contended.
func TestSessionCloseDoc(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	a, err := mysqlstore.NewSession(db, mysqlstore.SessionOptions{Table: opts.Table})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b := newSession(t, opts.Table, mysqlstore.SessionOptions{})
	c := ctxT(t)
	if _, err := a.Acquire(c, "k", "ta", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(c, "k", "tb", time.Second); !errors.Is(err, driver.ErrNotAcquired) { // control
		t.Fatalf("control: %v, want contended", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// The server frees a closed connection's locks when it processes the
	// disconnect, a moment after Close returns: poll, bounded.
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err := b.Acquire(c, "k", "tb", time.Second)
		if err == nil {
			break
		}
		if !errors.Is(err, driver.ErrNotAcquired) || time.Now().After(deadline) {
			t.Fatalf("2 s after Close the key is still held: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling the server, bounded
	}
	_, acq := a.Acquire(c, "k2", "ta", time.Second)
	_, que := a.AcquireQueued(c, "k2", "ta", time.Second)
	_, ext := a.Extend(c, "k", "ta", time.Second)
	for name, err := range map[string]error{"Acquire": acq, "AcquireQueued": que, "Extend": ext, "Release": a.Release(c, "k", "ta")} {
		if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s after Close = %v, want ErrInvalid", name, err)
		}
	}
	if err := db.PingContext(c); err != nil {
		t.Errorf("Close closed the pool: %v", err)
	}
}
