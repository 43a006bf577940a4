package pgstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5"
)

// TestSharedGuardStatements: on a server session that already holds a
// key's advisory lock, both lock statements (pg_try_advisory_lock and the
// queued pg_advisory_lock) return -1 and take nothing: one unlock frees
// the lock. Control: without the guard they take it again, a re-entry
// (two unlocks needed), which is how a shared session gives two holders.
func TestSharedGuardStatements(t *testing.T) {
	sessServer(t)
	conn, err := pgx.Connect(tctx(t), server(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(tctx(t)) })
	id := pgstore.LockID("dlock", t.Name())
	cls, obj := pgstore.LockIDParts(id)
	for _, guard := range []bool{true, false} {
		try, queued := pgstore.GuardedLockSQL(guard)
		for name, stmt := range map[string]string{"try": try, "queued": queued} {
			if _, err := conn.Exec(tctx(t), `SELECT pg_advisory_lock($1)`, id); err != nil {
				t.Fatal(err)
			}
			var fence *int64
			if err := conn.QueryRow(tctx(t), stmt, id, cls, obj, "dlock_fence").Scan(&fence); err != nil {
				t.Fatalf("%s (guard %v): %v", name, guard, err)
			}
			unlocks := 0
			for ok := true; ok && unlocks < 5; {
				if err := conn.QueryRow(tctx(t), `SELECT pg_advisory_unlock($1)`, id).Scan(&ok); err != nil {
					t.Fatal(err)
				}
				if ok {
					unlocks++
				}
			}
			switch {
			case guard && (fence == nil || *fence != -1 || unlocks != 1):
				t.Errorf("%s with the guard on a session holding the lock: fence %v, held %d times; want -1, once", name, fence, unlocks)
			case !guard && (fence == nil || *fence <= 0 || unlocks != 2):
				t.Errorf("control: %s without the guard: fence %v, held %d times; want a fence and a re-entry (twice)", name, fence, unlocks)
			}
		}
	}
}

// TestSessionRefusesALockedConnection: an application that took a key's
// advisory lock on a pool connection and gave the connection back has left
// a session that holds the lock; a SessionStore that pins that connection
// refuses the key (ErrSharedSession, matching ErrRefused) instead of
// re-entering the application's lock. Control: without the guard the store
// takes the key while the application holds it.
func TestSessionRefusesALockedConnection(t *testing.T) {
	srv := sessServer(t)
	for _, guard := range []bool{true, false} {
		pool := sessPool(t, srv.URL(), 2)
		key := fmt.Sprintf("%s-%v", t.Name(), guard) // the first round's lock stays held
		c, err := pool.Acquire(tctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(tctx(t), `SELECT pg_advisory_lock($1)`, pgstore.LockID("dlock", key)); err != nil {
			t.Fatal(err)
		}
		c.Release() // the pool's one connection, holding the key's lock
		s := newSession(t, pool, pgstore.SessionOptions{MaxConns: 1})
		if !guard {
			pgstore.WithoutSharedGuard(s)
		}
		_, err = s.Acquire(tctx(t), key, "tok", time.Minute)
		switch {
		case guard && (!errors.Is(err, pgstore.ErrSharedSession) || !errors.Is(err, driver.ErrRefused)):
			t.Fatalf("Acquire on a session holding the key's lock = %v; want ErrSharedSession (ErrRefused)", err)
		case !guard && err != nil:
			t.Fatalf("control: without the guard Acquire = %v; want it to re-enter the application's lock", err)
		}
		t.Logf("guard %v: Acquire: %v", guard, err)
	}
}
