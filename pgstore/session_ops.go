package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/sqlsession"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The statements. A bigint advisory lock shows in pg_locks as classid (high
// 32 bits), objid (low 32 bits) and objsubid 1, in the current database.
const (
	// tryLockSQL and lockSQL take the lock with a fence, or return
	// sharedFence (taking nothing) if their own backend holds it already.
	tryLockSQL = `SELECT CASE WHEN ` + sharedGuard + ` THEN -1 WHEN pg_try_advisory_lock($1) THEN nextval($4::regclass) END`
	lockSQL    = `WITH g AS MATERIALIZED (SELECT ` + sharedGuard + ` AS shared),
  l AS MATERIALIZED (SELECT pg_advisory_lock($1) FROM g WHERE NOT g.shared)
SELECT CASE WHEN g.shared THEN -1 ELSE nextval($4::regclass) END FROM g LEFT JOIN l ON true`
	unlockSQL = `SELECT pg_advisory_unlock($1)`
	lockWhere = `locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 1
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
	// checkSQL: does this backend hold the lock, does anyone.
	checkSQL   = `SELECT coalesce(bool_or(pid = pg_backend_pid()), false), count(*) > 0 FROM pg_locks WHERE granted AND ` + lockWhere
	takenSQL   = `SELECT count(*) > 0 FROM pg_locks WHERE granted AND ` + lockWhere
	waitersSQL = `SELECT count(*) FROM pg_locks WHERE NOT granted AND ` + lockWhere
)

// Acquire implements driver.Mutex. A key the store does not hold is one
// statement on a pinned connection, pg_try_advisory_lock with a fence from
// the sequence <Table>_fence in the same statement; a re-entry by the
// holding token, or an Acquire by another token of a key the store holds,
// is one statement checking in pg_locks that the holding's connection still
// holds it (re-entries are counted in the store, not on the server). ttl is
// ignored: the holding lasts as long as its connection. A contended key
// returns a *driver.ContendedError with Remaining -1. If ctx ends while the
// statement runs, the call returns ctx's error and a lock the statement
// took is unlocked when it completes. A missing fence sequence (Migrate not
// run) or missing privileges return an error matching driver.ErrRefused, and
// so does a server session that is not the store's alone
// (ErrSharedSession: a pooler in transaction mode, seen by the store's
// first-use check, or a statement's backend that holds the lock already),
// which takes nothing.
func (s *SessionStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if o := s.delegate(key, token); o != nil {
		return o.Acquire(ctx, key, token, ttl)
	}
	return s.eng.Acquire(ctx, key, token)
}

// dialect is the store's advisory lock SQL for its engine.
func (s *SessionStore) dialect() sqlsession.Dialect[*pgxpool.Conn, int64] {
	return sqlsession.Dialect[*pgxpool.Conn, int64]{
		Lock:    func(key string) int64 { return LockID(s.table, key) },
		TryLock: s.tryLock,
		Check: func(ctx context.Context, c *pgxpool.Conn, id int64) (mine, taken bool, err error) {
			err = c.QueryRow(ctx, checkSQL, cls(id), obj(id)).Scan(&mine, &taken)
			return mine, taken, err
		},
		Unlock: func(ctx context.Context, c *pgxpool.Conn, id int64) (ok bool, err error) {
			err = c.QueryRow(ctx, unlockSQL, id).Scan(&ok)
			return ok, err
		},
		Taken: s.taken,
		Wrap:  classify,
		Held:  func(key string) { registry.Store(s.regKey(key), s) },
		Freed: func(key string) { registry.CompareAndDelete(s.regKey(key), s) },
	}
}

// tryLock takes key's lock id on p with pg_try_advisory_lock and a fence from
// the sequence in the same statement. A lock taken after ctx ended is
// given back when the statement completes.
func (s *SessionStore) tryLock(ctx context.Context, p *pinned, key string, id int64) (uint64, bool, error) {
	v, err := s.eng.Pins.Run(ctx, p, func(ctx context.Context, c *pgxpool.Conn) (any, error) {
		var fence *int64
		err := c.QueryRow(ctx, s.guarded(tryLockSQL), id, cls(id), obj(id), s.seq).Scan(&fence)
		if err != nil && !c.Conn().IsClosed() {
			// A session-level advisory lock outlives its failed statement:
			// give back what pg_try_advisory_lock may have taken.
			_, _ = c.Exec(ctx, `SELECT pg_advisory_unlock($1) FROM pg_locks WHERE pid = pg_backend_pid() AND granted AND `+lockWhere3, id, cls(id), obj(id))
		}
		return fence, err
	}, func(ctx context.Context, c *pgxpool.Conn, v any, err error) {
		if f, _ := v.(*int64); err == nil && f != nil && *f != sharedFence { // taken after the caller gave up: give it back
			if _, err := c.Exec(ctx, unlockSQL, id); err != nil {
				_ = c.Conn().Close(ctx)
			}
		}
	})
	if err != nil {
		return 0, false, classify("acquire", err)
	}
	fence := v.(*int64)
	if fence == nil {
		return 0, false, nil
	}
	if *fence == sharedFence {
		err := errShared(key)
		s.markShared(err)
		return 0, false, err
	}
	return uint64(*fence), true, nil
}

// lockWhere3 is lockWhere with the lock id as $2 (classid) and $3 (objid).
const lockWhere3 = `locktype = 'advisory' AND classid = $2 AND objid = $3 AND objsubid = 1
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`

func cls(id int64) uint32 { c, _ := split(id); return c }
func obj(id int64) uint32 { _, o := split(id); return o }

// classify wraps a statement's error: privileges and a missing sequence
// match driver.ErrRefused, a pooler's refusal of a transaction
// ErrStatementPooling; the rest leave the outcome unknown.
func classify(op string, err error) error {
	if statementPooling(err) {
		return fmt.Errorf("%w: %s: %w", ErrStatementPooling, op, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "42P01", "42501", "3F000", "42883": // undefined table, privilege, schema, function
			return fmt.Errorf("%w: pgstore: %s: %w (run Migrate?)", driver.ErrRefused, op, err)
		}
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

// taken asks any pool connection whether some backend holds key.
func (s *SessionStore) taken(ctx context.Context, key string) (bool, error) {
	id := LockID(s.table, key)
	var t bool
	if err := s.pool.QueryRow(ctx, takenSQL, cls(id), obj(id)).Scan(&t); err != nil {
		return false, classify("inspect", err)
	}
	return t, nil
}

// Extend implements driver.Mutex: one statement on the holding's pinned
// connection confirming in pg_locks that it still holds the lock. It renews
// nothing on the server (advisory locks have no TTL: the round trip checks
// that the connection, the session, is alive). ttl is ignored; Grant.TTL is
// the check interval. When the connection died, or no longer holds the lock
// (a pooler such as PgBouncer in transaction mode gave the session to
// someone else), it returns driver.NotHeld: the holding is lost.
func (s *SessionStore) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if o := s.delegate(key, token); o != nil {
		return o.Extend(ctx, key, token, ttl)
	}
	return s.eng.Extend(ctx, key, token)
}

// Release implements driver.Mutex. The last hold is one pg_advisory_unlock
// on the holding's connection; an earlier one, like a Release by another
// token of a key the store holds, is one statement checking the holding in
// pg_locks. If ctx ends while the unlock runs, the call returns ctx's error
// and the store forgets the holding when the unlock completes.
//
// A ctx that has already ended returns an error matching ctx's error at
// once (no other sentinel): nothing is sent and nothing changes. The lock
// stays held by its pinned connection (an advisory lock has no TTL) until
// a Release with a live context, or Close, gives it back. The same holds
// when ctx ends while Release waits for the key or for the connection's
// previous statement.
func (s *SessionStore) Release(ctx context.Context, key, token string) error {
	if o := s.delegate(key, token); o != nil {
		return o.Release(ctx, key, token)
	}
	return s.eng.Release(ctx, key, token)
}

// Waiters implements driver.WaiterCounter: the backends waiting for the
// key's advisory lock (in AcquireQueued, or any other program's
// pg_advisory_lock), from pg_locks, in one query on the pool. A missing
// privilege returns an error matching driver.ErrRefused; a failed query,
// the driver's error, matching no sentinel.
func (s *SessionStore) Waiters(ctx context.Context, key string) (int, error) {
	id := LockID(s.table, key)
	var n int
	if err := s.pool.QueryRow(ctx, waitersSQL, cls(id), obj(id)).Scan(&n); err != nil {
		return 0, classify("count waiters", err)
	}
	return n, nil
}

// registry maps a key held by a SessionStore of this process (on one
// database, under one table prefix) to that store, so that a token's
// holding taken through one store can be re-entered, extended and released
// through another store value of the same process (an explicit dlock Owner
// used with two Clients). Advisory locks belong to one connection: another
// process cannot do this.
var registry sync.Map // regKey -> *SessionStore

// regKey names key on the store's database and table prefix.
func (s *SessionStore) regKey(key string) string { return s.ident + "\x00" + key }

// delegate returns another store of this process whose live holding of
// key belongs to token, or nil.
func (s *SessionStore) delegate(key, token string) *SessionStore {
	v, ok := registry.Load(s.regKey(key))
	if !ok || v.(*SessionStore) == s {
		return nil
	}
	if o := v.(*SessionStore); o.eng.Own(key, token) != nil && !o.eng.Closed() {
		return o
	}
	return nil
}
