package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"example.com/dlock/driver"
)

// The Semaphore on the lease table's database: holdings are rows of
// <p>_permits (permits.go has the schema), each with its own expiry on the
// database clock and a fence from the lease table's sequence. An
// acquisition is one READ COMMITTED transaction that first locks the key's
// anchor row in <p>_semaphores, so the key's acquirers take turns and each
// counts what the ones before it committed. There is no PermitNotifier:
// MariaDB has no notification, so waiters back off, capped by the
// earliest expiry (PermitsTakenError.Remaining).

var _ driver.Semaphore = (*Store)(nil)

// permitState is what an acquisition reads of its key.
type permitState struct {
	live, used, lim, expired int
	firstUS                  int64 // µs until the earliest live expiry; -1 if none
	mine                     int   // the caller's live permits, 0 if none
	mineFence                uint64
}

// readPermitsStmt reads a key's state in one consistent read (the
// caller's digest twice, then the key).
func readPermitsStmt(n names) string {
	live := "expires_at > " + now
	return "SELECT COALESCE(SUM(" + live + "), 0), COALESCE(SUM(IF(" + live + ", permits, 0)), 0)," +
		" COALESCE(MAX(IF(" + live + ", lim, NULL)), 0)," +
		" COALESCE(MIN(IF(" + live + ", TIMESTAMPDIFF(MICROSECOND, " + now + ", expires_at), NULL)), -1)," +
		" COALESCE(SUM(NOT (" + live + ")), 0)," +
		" COALESCE(MAX(IF(owner = ? AND " + live + ", permits, 0)), 0)," +
		" COALESCE(MAX(IF(owner = ? AND " + live + ", fence, 0)), 0)" +
		" FROM " + n.permits + " WHERE name = ?"
}

// anchorStmt locks key's anchor row, creating it if missing.
func anchorStmt(n names) string {
	return "INSERT INTO " + n.semaphores + " (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name"
}

func (s *Store) readPermits(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, key string, d []byte) (permitState, error) {
	var st permitState
	err := q.QueryRowContext(ctx, s.readPermitsSQL, d, d, []byte(key)).Scan(
		&st.live, &st.used, &st.lim, &st.firstUS, &st.expired, &st.mine, &st.mineFence)
	return st, err
}

// checkPermits validates an AcquirePermits' arguments (with n = k = 1, an
// ExtendPermits' or ReleasePermits') before any I/O, and that ctx is not
// done.
func checkPermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) error {
	if err := driver.ValidatePermits(key, n, k, ttl); err != nil {
		return err
	}
	if err := checkArgs(key, token, ttl, true); err != nil {
		return err
	}
	return ctx.Err()
}

// AcquirePermits implements driver.Semaphore in one READ COMMITTED
// transaction, sent as one statement (permits_acquire.go): it locks key's
// anchor row, reads the key's holdings (and deletes expired ones, if it
// saw any, under their row locks: a holding whose extension commits
// meanwhile stays, and is read again), then adds token's holding of k
// permits with a fence from the sequence if k are free (n becomes the
// key's limit if none is out). A token holding k permits already gets its
// holding back (same fence, expiry the later of the current one and ttl
// from now). Refusals roll back, changing nothing: a
// *driver.PermitsTakenError with the earliest expiry, a
// *driver.LimitMismatchError, an error matching driver.ErrInvalid for bad
// arguments (before any I/O; also after Close) or another k. A done ctx
// returns its error before any I/O; a missing schema matches
// driver.ErrRefused; other errors leave the outcome unknown (a lost
// answer). One round trip (the statement is prepared on each connection
// the first time it runs there, as Acquire's is), and an occasional sweep
// as for locks.
func (s *Store) AcquirePermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) (driver.PermitGrant, error) {
	if err := checkPermits(ctx, key, token, n, k, ttl); err != nil {
		return driver.PermitGrant{}, err
	}
	if s.acquirePrep.isClosed() {
		return driver.PermitGrant{}, errClosedStore
	}
	g, err := s.acquirePermits(ctx, key, digest(token), n, k, ttl)
	if err == nil || errors.Is(err, driver.ErrNotAcquired) || errors.Is(err, driver.ErrInvalid) {
		s.maybeSweep(ctx) // the statement ran
	}
	return g, err
}

// ExtendPermits implements driver.Semaphore in two statements: an UPDATE
// that sets token's live holding of key to expire ttl from now on the
// database clock (shorter or longer; other holdings untouched), then a
// read of the holding and the key's permits out. If token holds no live
// permit of key it changes nothing and returns driver.NotHeld(false)
// (ErrExpired). Bad arguments return driver.ErrInvalid before any I/O; a
// missing schema driver.ErrRefused; other errors leave the outcome
// unknown.
func (s *Store) ExtendPermits(ctx context.Context, key, token string, ttl time.Duration) (driver.PermitGrant, error) {
	if err := checkPermits(ctx, key, token, 1, 1, ttl); err != nil {
		return driver.PermitGrant{}, err
	}
	d := digest(token)
	_, err := s.db.ExecContext(ctx, "UPDATE "+s.n.permits+" SET expires_at = "+now+" + INTERVAL ? MICROSECOND"+
		" WHERE name = ? AND owner = ? AND expires_at > "+now, ttl.Microseconds(), []byte(key), d)
	if err != nil {
		return driver.PermitGrant{}, wrap("extend permits", err)
	}
	// The UPDATE's count of rows is of rows changed, 0 for an expiry set
	// to its own value: the read below tells whether token holds the key.
	st, err := s.readPermits(ctx, s.db, key, d)
	if err != nil {
		return driver.PermitGrant{}, wrap("extend permits", err)
	}
	if st.mine == 0 {
		return driver.PermitGrant{}, driver.NotHeld(false)
	}
	return driver.PermitGrant{Fence: st.mineFence, Permits: st.mine, Used: st.used, TTL: ttl}, nil
}

// ReleasePermits implements driver.Semaphore in one statement: it deletes
// token's live holding of key. If token holds no live permit of key it
// changes nothing and returns driver.NotHeld(false) (ErrExpired). No
// waiter is woken (there is no PermitNotifier): waiters find the permits
// at their next try. go-sql-driver never resends a statement once it may
// have reached the server, so there is no resent release to recognise: a
// repeated release answers NotHeld. Errors as ExtendPermits.
func (s *Store) ReleasePermits(ctx context.Context, key, token string) error {
	if err := checkPermits(ctx, key, token, 1, 1, time.Millisecond); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, "DELETE FROM "+s.n.permits+" WHERE name = ? AND owner = ? AND expires_at > "+now,
		[]byte(key), digest(token))
	if err != nil {
		return wrap("release permits", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return driver.NotHeld(false)
	}
	s.maybeSweep(ctx)
	return nil
}
