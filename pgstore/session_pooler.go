package pgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5"
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
var ErrSharedSession = fmt.Errorf("%w: pgstore: session locks need a server session of their own, but this one is shared (a pooler in transaction or statement mode, PgBouncer, in front?)", driver.ErrRefused)

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
// whether a pooler shares server sessions between client connections
// (samplePIDs: three statements, on c and on an idle connection of the
// pool, or one of its own when the pool has none idle). It returns an error
// matching ErrSharedSession, sticky for the store, when it sees one (also
// matching ErrStatementPooling when the pooler refused the sample's BEGIN:
// statement mode, where that BEGIN's server connection is closed, and
// with it any session lock it held); nil when it sees none or cannot
// check (the second connection fails within ConnWait, a statement fails):
// the next pin checks again, and the lock statements' own guard
// (sharedGuard) still refuses a lock whose server session holds it
// already.
func (s *SessionStore) checkShared(ctx context.Context, c *pgxpool.Conn) error {
	s.mu.Lock()
	done, verdict := s.sharedChecked || s.noSharedCheck, s.shared
	s.mu.Unlock()
	if done {
		return verdict
	}
	pids, err := samplePIDs(ctx, c, s.pool, s.wait)
	if err != nil && !statementPooling(err) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sharedChecked = true
	switch {
	case err != nil:
		s.shared = fmt.Errorf("%w: %w: the second connection's BEGIN was refused (%w)", ErrSharedSession, ErrStatementPooling, err)
	case sharedPIDs(pids):
		s.shared = fmt.Errorf("%w: two client connections ran on server backends %d, %d, %d (the first and last on one connection): a pooler in transaction mode", ErrSharedSession, pids[0], pids[1], pids[2])
	}
	return s.shared
}

// samplePIDs reads the server backend pid of c, then of a second
// connection (secondConn: an idle one of the pool, else one of its own)
// inside a transaction, which keeps it on one backend while c reads its pid
// again. Without a pooler, or through one in session mode, every client connection keeps
// its own backend: the second pid differs from the first, the third equals
// it. Through PgBouncer in transaction mode the second connection usually
// gets the backend c has just given back (PgBouncer hands out the last one
// used), or c moves to another: see sharedPIDs. wait bounds the wait for the
// second connection.
func samplePIDs(ctx context.Context, c *pgxpool.Conn, pool *pgxpool.Pool, wait time.Duration) ([3]int64, error) {
	var p [3]int64
	if err := c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&p[0]); err != nil {
		return p, err
	}
	c2, release, err := secondConn(ctx, pool, wait)
	if err != nil {
		return p, fmt.Errorf("a second connection: %w", err)
	}
	defer release()
	tx, err := c2.Begin(ctx)
	if err != nil {
		return p, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&p[1]); err != nil {
		return p, err
	}
	err = c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&p[2])
	return p, err
}

// secondConn returns a second connection for samplePIDs and the function
// that gives it back: an idle connection of pool when it has one (no
// connect), else one of its own with the pool's settings, closed after, so
// that the pool is left as it was. wait bounds the wait for it.
func secondConn(ctx context.Context, pool *pgxpool.Pool, wait time.Duration) (*pgx.Conn, func(), error) {
	cctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if pool.Stat().IdleConns() > 0 {
		pc, err := pool.Acquire(cctx)
		if err != nil {
			return nil, nil, err
		}
		return pc.Conn(), pc.Release, nil
	}
	c, err := pgx.ConnectConfig(cctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, nil, err
	}
	return c, func() { _ = c.Close(context.WithoutCancel(ctx)) }, nil
}

// sharedPIDs reports whether a sample of samplePIDs proves that server
// sessions are shared: two client connections on one backend, or one
// client connection on two.
func sharedPIDs(p [3]int64) bool { return p[1] == p[0] || p[2] != p[0] }

// markShared makes err (a guard's refusal) the store's sticky verdict.
func (s *SessionStore) markShared(err error) {
	s.mu.Lock()
	s.sharedChecked, s.shared = true, err
	s.mu.Unlock()
}
