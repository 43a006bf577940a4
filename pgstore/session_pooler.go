package pgstore

import (
	"context"
	"fmt"
	"strings"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrSharedSession means that the server session (backend) behind a pinned
// connection is not the store's alone, so a session-level advisory lock
// taken on it could be taken again, as a re-entry, by another client: a
// pooler in transaction or statement mode (PgBouncer with pool_mode =
// transaction) is in front, or the application gave a connection holding
// the key's advisory lock back to the pool. It matches driver.ErrRefused:
// retrying cannot fix it. The call changed nothing. Use a direct
// connection, PgBouncer in session mode, or the lease table (New), which
// works through any pooler.
var ErrSharedSession = fmt.Errorf("%w: pgstore: session locks need a server session of their own, but this one is shared (a pooler in transaction mode, PgBouncer, in front?)", driver.ErrRefused)

// The shared-session guard of the lock statements: $2 and $3 are the lock
// id as pg_locks shows it (see lockWhere3). A statement that finds the lock
// already held by its own backend, which the store never re-locks (it
// counts re-entries itself), takes nothing and returns -1.
const sharedGuard = `EXISTS (SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() AND granted AND ` + lockWhere3 + `)`

// unguarded replaces sharedGuard when the guard is off (tests only): false
// for the lock ids the statements get.
const unguarded = `($2::oid IS NULL AND $3::oid IS NULL)`

// guarded returns q, a guarded lock statement, without its guard when the
// tests turned it off.
func (s *SessionStore) guarded(q string) string {
	if s.noSharedGuard {
		return strings.Replace(q, sharedGuard, unguarded, 1)
	}
	return q
}

// sharedFence is what a guarded lock statement returns for a shared session.
const sharedFence = -1

// errShared is ErrSharedSession for a lock statement that found the lock
// already held by its own server session.
func errShared(key string) error {
	return fmt.Errorf("%w: acquire %q: the server session already holds the key's lock, though this store does not", ErrSharedSession, key)
}

// checkShared finds out, once per store, on its first pinned connection c,
// whether a pooler shares server sessions between client connections: c
// reads its backend pid; a second pool connection, in a transaction (which
// keeps it on one backend), reads its own; c reads its pid again. Without
// a pooler, or through one in session mode, the second pid differs from the
// first and the third equals it, always. Through PgBouncer in transaction
// mode the second connection usually gets the backend c just gave back
// (PgBouncer reuses the last one), or c moves: either is proof. It returns
// an error matching ErrSharedSession, sticky for the store, when it sees
// one; nil when it sees none or cannot check (no second connection within
// ConnWait, an error): the next pin checks again, and the lock statements'
// own guard (sharedGuard) still refuses a re-entry on a shared session.
func (s *SessionStore) checkShared(ctx context.Context, c *pgxpool.Conn) error {
	s.mu.Lock()
	done, verdict := s.sharedChecked || s.noSharedCheck, s.shared
	s.mu.Unlock()
	if done {
		return verdict
	}
	var p1, p2, p3 int64
	if err := c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&p1); err != nil {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, s.wait)
	c2, err := s.pool.Acquire(actx)
	cancel()
	if err != nil {
		return nil
	}
	defer c2.Release()
	tx, err := c2.Begin(ctx)
	if err != nil {
		return nil
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&p2); err != nil {
		return nil
	}
	if err := c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&p3); err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sharedChecked = true
	if p2 == p1 || p3 != p1 {
		s.shared = fmt.Errorf("%w: two client connections ran on server backends %d, %d, %d (the first and last on one client connection): a pooler in transaction mode", ErrSharedSession, p1, p2, p3)
	}
	return s.shared
}

// markShared makes err (a guard's refusal) the store's sticky verdict.
func (s *SessionStore) markShared(err error) {
	s.mu.Lock()
	s.sharedChecked, s.shared = true, err
	s.mu.Unlock()
}
