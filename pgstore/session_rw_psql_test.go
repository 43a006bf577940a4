package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// plainConn is a connection of a pool of its own, outside dlock, as a psql
// session would be.
func plainConn(t *testing.T, url string) *pgxpool.Conn {
	t.Helper()
	c, err := sessPool(t, url, 2).Acquire(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Release)
	return c
}

func plainExec(t *testing.T, c *pgxpool.Conn, sql string, id int64) {
	t.Helper()
	if _, err := c.Exec(ctx(t), sql, id); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// wantRWRefused asserts that AcquireRead or AcquireWrite of key by a fresh
// token is refused with a *driver.RWTakenError, and returns it.
func wantRWRefused(t *testing.T, m *pgstore.SessionStore, key string, mode driver.RWMode) *driver.RWTakenError {
	t.Helper()
	var err error
	if mode == driver.RWWrite {
		_, err = m.AcquireWrite(ctx(t), key, tok(), time.Minute)
	} else {
		_, err = m.AcquireRead(ctx(t), key, tok(), time.Minute)
	}
	var te *driver.RWTakenError
	if !errors.As(err, &te) {
		t.Fatalf("Acquire %v of %q while a plain session holds it: got %v, want *RWTakenError", mode, key, err)
	}
	return te
}

// TestRWPlainSessionInterop: a plain SQL session (another program, psql)
// taking pg_advisory_lock_shared(RWLockID) lets a dlock reader in and
// keeps a dlock writer out; pg_advisory_lock(RWLockID) keeps a dlock reader
// out. The control: the same plain locks on the Mutex's LockID of the key
// keep nobody out (the test tells the ids apart).
func TestRWPlainSessionInterop(t *testing.T) {
	srv := sessServer(t)
	m := newSession(t, sessPool(t, srv.URL(), 4), pgstore.SessionOptions{})
	psql := plainConn(t, srv.URL())
	key := "rw-psql-" + tok()[:8]
	id := pgstore.RWLockID("dlock", key)

	plainExec(t, psql, `SELECT pg_advisory_lock_shared($1)`, id)
	r := tok()
	if g, err := m.AcquireRead(ctx(t), key, r, time.Minute); err != nil || g.Readers != 2 {
		t.Fatalf("AcquireRead beside a plain shared lock = %+v, %v; want in, 2 readers", g, err)
	}
	if te := wantRWRefused(t, m, key, driver.RWWrite); te.Held != driver.RWRead {
		t.Fatalf("a writer beside a plain shared lock and a dlock reader: %+v, want held read", te)
	}
	if err := m.ReleaseRW(ctx(t), key, r); err != nil {
		t.Fatal(err)
	}
	if te := wantRWRefused(t, m, key, driver.RWWrite); te.Held != driver.RWRead || te.Readers != 1 {
		t.Fatalf("a writer beside the plain shared lock alone: %+v, want held read by 1", te)
	}
	plainExec(t, psql, `SELECT pg_advisory_unlock_shared($1)`, id)

	key2 := key + "-x"
	id2 := pgstore.RWLockID("dlock", key2)
	plainExec(t, psql, `SELECT pg_advisory_lock($1)`, id2)
	if te := wantRWRefused(t, m, key2, driver.RWRead); te.Held != driver.RWWrite {
		t.Fatalf("a reader beside a plain exclusive lock: %+v, want held write", te)
	}
	plainExec(t, psql, `SELECT pg_advisory_unlock($1)`, id2)
	w := tok()
	if _, err := m.AcquireWrite(ctx(t), key2, w, time.Minute); err != nil {
		t.Fatalf("AcquireWrite once the plain session let go: %v", err)
	}
	if err := m.ReleaseRW(ctx(t), key2, w); err != nil {
		t.Fatal(err)
	}

	// Control: the Mutex's id of the key is another lock.
	key3 := key + "-mutex"
	plainExec(t, psql, `SELECT pg_advisory_lock($1)`, pgstore.LockID("dlock", key3))
	if _, err := m.AcquireWrite(ctx(t), key3, tok(), time.Minute); err != nil {
		t.Fatalf("control: AcquireWrite beside a plain lock on the Mutex's id: %v, want in", err)
	}
}

// TestRWPlainQueuedWriterKeepsReadersOut: a plain session waiting in
// pg_advisory_lock(RWLockID) behind a dlock reader keeps new dlock readers
// out (PostgreSQL refuses a lock that conflicts with a queued request: its
// own writer preference), and gets the key once the reader leaves. The
// control: before it queues, a second reader gets in.
func TestRWPlainQueuedWriterKeepsReadersOut(t *testing.T) {
	srv := sessServer(t)
	m := newSession(t, sessPool(t, srv.URL(), 4), pgstore.SessionOptions{})
	if got := queuedWriterLetsReaderIn(t, srv.URL(), m); got {
		t.Fatal("a new reader got in while a plain writer queued")
	}
}

// TestRWPlainQueuedWriterControl: without the read statement's check for
// a queued exclusive request, a new reader served on the connection that
// already reads gets in past the queued plain writer (PostgreSQL grants a
// backend a lock mode it holds already): the check is what keeps it out.
func TestRWPlainQueuedWriterControl(t *testing.T) {
	srv := sessServer(t)
	m := newSession(t, sessPool(t, srv.URL(), 4), pgstore.SessionOptions{MaxConns: 1})
	pgstore.WithoutQueuedWriterCheck(m)
	if got := queuedWriterLetsReaderIn(t, srv.URL(), m); !got {
		t.Fatal("control: the broken store kept the new reader out; the test cannot tell the check's effect")
	}
}

// queuedWriterLetsReaderIn has a dlock reader hold a key, a plain session
// queue in pg_advisory_lock behind it, and reports whether a new dlock
// reader got in; then the first reader leaves and the plain writer must
// get the key.
func queuedWriterLetsReaderIn(t *testing.T, url string, m *pgstore.SessionStore) bool {
	t.Helper()
	psql := plainConn(t, url)
	key := "rw-queued-" + tok()[:8]
	id := pgstore.RWLockID("dlock", key)
	r, r2 := tok(), tok()
	if _, err := m.AcquireRead(ctx(t), key, r, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AcquireRead(ctx(t), key, r2, time.Minute); err != nil { // control
		t.Fatalf("control: a second reader before any writer queued: %v", err)
	}
	if err := m.ReleaseRW(ctx(t), key, r2); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := psql.Exec(context.Background(), `SELECT pg_advisory_lock($1)`, id)
		got <- err
	}()
	waitQueued(t, m, key)
	r3 := tok()
	_, err := m.AcquireRead(ctx(t), key, r3, time.Minute)
	var te *driver.RWTakenError
	in := err == nil
	switch {
	case in:
		if err := m.ReleaseRW(ctx(t), key, r3); err != nil {
			t.Fatal(err)
		}
	case !errors.As(err, &te) || !te.WriterWaiting:
		t.Fatalf("a new reader while a plain writer queues: %v, want in or *RWTakenError with WriterWaiting", err)
	}
	if err := m.ReleaseRW(ctx(t), key, r); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the plain writer: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the plain writer did not get the key within 10 s of the reader's release")
	}
	plainExec(t, psql, `SELECT pg_advisory_unlock($1)`, id)
	return in
}

// waitQueued waits (bounded) until a backend waits for key's RW lock.
func waitQueued(t *testing.T, m *pgstore.SessionStore, key string) {
	t.Helper()
	id := uint64(pgstore.RWLockID("dlock", key))
	for range 500 {
		var n int
		err := m.Pool().QueryRow(ctx(t), `SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 1`,
			uint32(id>>32), uint32(id)).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx(t).Done():
			t.Fatal(ctx(t).Err())
		}
	}
	t.Fatal("the plain writer did not queue within 500 polls")
}
