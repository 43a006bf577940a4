package mysqlstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

func newSession(t *testing.T, table string, opts mysqlstore.SessionOptions) *mysqlstore.Session {
	t.Helper()
	opts.Table = table
	s, err := mysqlstore.NewSession(openDB(t, shared(t).DSN()), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSessionKilledConnectionIsLost: when the server ends a holder's
// connection (KILL CONNECTION, as when it dies), another client gets the
// key at once and the holder's next Extend reports NotHeld: the lost
// signal. Control: before the kill, the other client contends.
func TestSessionKilledConnectionIsLost(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	a := newSession(t, opts.Table, mysqlstore.SessionOptions{})
	b := newSession(t, opts.Table, mysqlstore.SessionOptions{})
	c := ctxT(t)
	g, err := a.Acquire(c, "k", "ta", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(c, "k", "tb", time.Second); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("control: second client got %v, want contended", err)
	}
	for _, id := range a.ConnIDs() {
		if _, err := db.Exec("KILL CONNECTION ?", id); err != nil {
			t.Fatal(err)
		}
	}
	g2, err := b.Acquire(c, "k", "tb", time.Second)
	if err != nil || g2.Fence <= g.Fence {
		t.Fatalf("after the kill: %+v, %v (fence must pass %d)", g2, err, g.Fence)
	}
	if _, err := a.Extend(c, "k", "ta", time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("killed holder's Extend: %v, want ErrNotHeld", err)
	}
}

// TestSessionConnLimit: with MaxConns 2 and 2 keys per connection, a fifth
// key gets ErrConnLimit (no pool exhaustion) and changes nothing; after one
// release it is taken. The pool is never closed by the store.
func TestSessionConnLimit(t *testing.T) {
	_, opts := migrated(t, mysqlstore.Options{})
	s := newSession(t, opts.Table, mysqlstore.SessionOptions{MaxConns: 2, LocksPerConn: 2})
	c := ctxT(t)
	for _, k := range []string{"a", "b", "c", "d"} {
		if _, err := s.Acquire(c, k, "t"+k, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.ConnIDs()); n != 2 {
		t.Fatalf("%d connections pinned for 4 keys at 2 per connection", n)
	}
	if _, err := s.Acquire(c, "e", "te", time.Second); !errors.Is(err, mysqlstore.ErrConnLimit) {
		t.Fatalf("fifth key: %v, want ErrConnLimit", err)
	}
	if err := s.Release(c, "a", "ta"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(c, "e", "te", time.Second); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

// TestSessionQueuedCancelLeavesNothing: a waiter in GET_LOCK whose context
// ends returns its error soon and holds nothing: once the holder releases,
// a third client takes the key at once. A waiter with time gets the key
// when the holder releases, with a greater fence.
func TestSessionQueuedCancelLeavesNothing(t *testing.T) {
	_, opts := migrated(t, mysqlstore.Options{})
	a := newSession(t, opts.Table, mysqlstore.SessionOptions{})
	b := newSession(t, opts.Table, mysqlstore.SessionOptions{})
	c := ctxT(t)
	g, err := a.Acquire(c, "k", "ta", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wc, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := b.AcquireQueued(wc, "k", "tb", time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("cancelled waiter returned after %v", el)
	}
	done := make(chan error, 1)
	var g2 driver.Grant
	go func() {
		var err error
		g2, err = b.AcquireQueued(c, "k", "tb2", time.Second)
		done <- err
	}()
	if err := a.Release(c, "k", "ta"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || g2.Fence <= g.Fence {
		t.Fatalf("waiter: %+v, %v", g2, err)
	}
	if err := b.Release(c, "k", "tb2"); err != nil {
		t.Fatal(err)
	}
	third := newSession(t, opts.Table, mysqlstore.SessionOptions{})
	if _, err := third.Acquire(c, "k", "tc", time.Second); err != nil {
		t.Fatalf("after the cancelled wait and a release, the key is not free: %v", err)
	}
}

// TestLockName: short lower-case keys keep their name; others are hashed
// to 53 characters, and "A" and "a" get different names.
func TestLockName(t *testing.T) {
	if n := mysqlstore.LockName("dlock", "jobs/nightly"); n != "dlock:jobs/nightly" {
		t.Fatalf("plain key: %q", n)
	}
	up, low := mysqlstore.LockName("dlock", "A"), mysqlstore.LockName("dlock", "a")
	long := mysqlstore.LockName("dlock", strings.Repeat("x", 100))
	if up == low || len(long) != 53 || len(up) > 64 || !strings.HasPrefix(long, "#") || strings.ToLower(up) != up {
		t.Fatalf("names: %q %q %q", up, low, long)
	}
}

// TestSessionLostSignalThroughClient: a dlock Client on the session lock
// (CheckEvery 1 s) holds a key; the server ends the holding connection.
// The lease's Done closes with an error matching dlock.ErrLost within
// CheckEvery plus slack. Control: another Client's lease, whose connection
// lives, stays held past the same bound.
func TestSessionLostSignalThroughClient(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	s := newSession(t, opts.Table, mysqlstore.SessionOptions{CheckEvery: time.Second})
	ctl, err := client(t, newSession(t, opts.Table, mysqlstore.SessionOptions{CheckEvery: time.Second})).Lock(ctxT(t), "control")
	if err != nil {
		t.Fatal(err)
	}
	l, err := client(t, s).Lock(ctxT(t), "k")
	if err != nil {
		t.Fatal(err)
	}
	const bound = time.Second + 3*time.Second // CheckEvery + slack
	start := time.Now()
	for _, id := range s.ConnIDs() {
		if _, err := db.Exec("KILL CONNECTION ?", id); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), dlock.ErrLost) {
			t.Fatalf("lease ended with %v, want ErrLost", l.Err())
		}
		t.Logf("loss reported %v after the kill", time.Since(start).Round(time.Millisecond))
	case <-time.After(bound):
		t.Fatalf("no loss reported %v after the connection was killed", bound)
	}
	select {
	case <-ctl.Done():
		t.Fatalf("control lease (its connection alive) ended: %v", ctl.Err())
	case <-time.After(bound - time.Since(start)):
	}
}
