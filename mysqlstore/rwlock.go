package mysqlstore

import (
	"context"
	"database/sql"
	"time"

	"example.com/dlock/driver"
)

// The RWMutex on the lease table's database: holdings are rows of
// <p>_rwholds (rwlock_schema.go has the schema), each with its own expiry
// on the database clock and a fence from the lease table's sequence. An
// acquisition is one READ COMMITTED transaction that first locks the key's
// anchor row in <p>_rwkeys, which also carries the writer-waiting mark, so
// the key's acquirers take turns and each sees what the ones before it
// committed. Extension and release are one statement each on the caller's
// own row. There is no RWNotifier: MariaDB has no notification, so waiters
// back off, capped by RWTakenError.Remaining.

var _ driver.RWMutex = (*Store)(nil)

// The modes as stored in rwholds.mode.
const (
	rwRead  = int(driver.RWRead)
	rwWrite = int(driver.RWWrite)
)

// rwState is what an acquisition reads of its key.
type rwState struct {
	readers, writers, expired int
	firstUS                   int64 // µs until the earliest live holding's expiry; -1 if none
	mine                      int   // the caller's live holding's mode, 0 if none
	mineFence                 uint64
	markUS                    int64 // µs until the live mark ends; -1 if none
	markMine                  bool  // the live mark is the caller's
}

// readRWStmt reads a key's holdings in one consistent read (the caller's
// digest twice, then the key).
func readRWStmt(n names) string {
	live := "expires_at > " + now
	return "SELECT COALESCE(SUM(" + live + " AND mode = 1), 0), COALESCE(SUM(" + live + " AND mode = 2), 0)," +
		" COALESCE(SUM(NOT (" + live + ")), 0)," +
		" COALESCE(MIN(IF(" + live + ", TIMESTAMPDIFF(MICROSECOND, " + now + ", expires_at), NULL)), -1)," +
		" COALESCE(MAX(IF(owner = ? AND " + live + ", mode, 0)), 0)," +
		" COALESCE(MAX(IF(owner = ? AND " + live + ", fence, 0)), 0)" +
		" FROM " + n.rwHolds + " WHERE name = ?"
}

// rwAnchorStmt locks key's anchor row, creating it if missing, and returns
// its mark: µs left (-1 if none) and whether it is the caller's.
func rwAnchorStmt(n names) string {
	return "INSERT INTO " + n.rwKeys + " (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name" +
		" RETURNING IF(mark_until > " + now + ", TIMESTAMPDIFF(MICROSECOND, " + now + ", mark_until), -1)," +
		" COALESCE(mark_owner = ?, 0)"
}

// taken is the refusal of a call that st's holdings (or, with markOnly,
// its mark alone) keep out.
func (st rwState) taken(markOnly bool) *driver.RWTakenError {
	e := &driver.RWTakenError{Readers: st.readers, WriterWaiting: st.markUS >= 0, Remaining: micros(st.firstUS)}
	switch {
	case st.writers > 0:
		e.Held, e.Readers = driver.RWWrite, 0
	case st.readers > 0:
		e.Held = driver.RWRead
	}
	if markOnly {
		e.Remaining = micros(st.markUS)
	}
	return e
}

func micros(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

// checkRW validates an RWMutex call's arguments before any I/O, and that
// ctx is not done.
func checkRW(ctx context.Context, key, token string, ttl time.Duration) error {
	if err := driver.ValidateRW(key, ttl); err != nil {
		return err
	}
	if err := checkArgs(key, token, ttl, true); err != nil {
		return err
	}
	return ctx.Err()
}

// AcquireRead implements driver.RWMutex in one READ COMMITTED transaction:
// it locks key's anchor row, reads the mark and the key's holdings
// (deleting expired ones under their row locks), then adds token's read holding with a fence from the sequence unless a
// writer holds the key or a mark is live. A reader's call is a re-entry
// (same fence, expiry the later of the current one and ttl from now), the
// writer's a downgrade in place (the same, now a read holding). A refusal
// is a *driver.RWTakenError and changes nothing (rolled back). Bad
// arguments (and a closed store) match driver.ErrInvalid before any I/O; a
// done ctx returns its error; a missing schema matches driver.ErrRefused;
// other errors leave the outcome unknown (a lost COMMIT's answer). Six
// statements when granted (SET TRANSACTION, START TRANSACTION, the anchor,
// the read, the write, COMMIT), each one round trip with
// interpolateParams=true.
func (s *Store) AcquireRead(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	return s.acquireRW(ctx, key, token, ttl, rwRead)
}

// AcquireWrite implements driver.RWMutex as AcquireRead does: token gets
// the write holding of key if no holding is live (and ends its own mark).
// If one is, it sets the mark to token for driver.WriterWaitTTL on the
// database clock, commits that alone and returns a *driver.RWTakenError.
// The writer's call is a re-entry; a reader's returns driver.ErrUpgrade,
// changing nothing. Other errors as AcquireRead.
func (s *Store) AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	return s.acquireRW(ctx, key, token, ttl, rwWrite)
}

// rwTx is one acquisition's transaction: its arguments and its outcome.
type rwTx struct {
	s       *Store
	ctx     context.Context
	tx      *sql.Tx
	key, d  []byte
	ttl     time.Duration
	mode    int
	g       driver.RWGrant
	refusal error
}

func (s *Store) acquireRW(ctx context.Context, key, token string, ttl time.Duration, mode int) (driver.RWGrant, error) {
	if err := checkRW(ctx, key, token, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	if s.acquirePrep.isClosed() {
		return driver.RWGrant{}, errClosedStore
	}
	a := &rwTx{s: s, ctx: ctx, key: []byte(key), d: digest(token), ttl: ttl, mode: mode}
	err := s.inTx(ctx, "acquire "+driver.RWMode(mode).String(), func(tx *sql.Tx) (bool, error) {
		a.tx, a.g, a.refusal = tx, driver.RWGrant{Mode: driver.RWMode(mode), TTL: ttl}, nil
		st, err := a.lock()
		switch {
		case err != nil:
			return false, err
		case st.mine != 0:
			return a.reenter(st)
		case mode == rwRead:
			return a.admitReader(st)
		}
		return a.admitWriter(st)
	})
	if err != nil {
		return driver.RWGrant{}, err
	}
	s.maybeSweep(ctx)
	if a.refusal != nil {
		return driver.RWGrant{}, a.refusal
	}
	return a.g, nil
}

// lock locks the key's anchor (creating it if missing) and reads the
// key's mark and live holdings; if it saw expired holdings it deletes them
// and reads again. The DELETE waits for the row lock of an extension in
// flight and re-checks the expiry on the row it commits, so a holding
// extended just before its expiry is counted, never taken for expired
// (TestRWExtensionInFlightIsCounted). The sweep takes the anchor first
// too, so it never deletes a key's rows beside an acquisition of the key
// (their deletions and inserts deadlocked before: sweepUnderAnchors).
func (a *rwTx) lock() (rwState, error) {
	var st rwState
	if err := a.tx.QueryRowContext(a.ctx, a.s.rwAnchorSQL, a.key, a.d).Scan(&st.markUS, &st.markMine); err != nil {
		return st, err
	}
	read := func() error {
		return a.tx.QueryRowContext(a.ctx, a.s.readRWSQL, a.d, a.d, a.key).Scan(
			&st.readers, &st.writers, &st.expired, &st.firstUS, &st.mine, &st.mineFence)
	}
	if err := read(); err != nil || st.expired == 0 || a.s.rwNoPrune {
		return st, err
	}
	if _, err := a.tx.ExecContext(a.ctx, "DELETE FROM "+a.s.n.rwHolds+" WHERE name = ? AND expires_at <= "+now, a.key); err != nil {
		return st, err
	}
	return st, read()
}

// reenter serves a token that holds the key: a re-entry, a downgrade (the
// writer asking to read) or a refused upgrade (a reader asking to write).
func (a *rwTx) reenter(st rwState) (bool, error) {
	if a.mode == rwWrite && st.mine == rwRead {
		a.refusal = driver.ErrUpgrade
		return false, nil
	}
	a.g.Fence, a.g.Readers = st.mineFence, st.readers
	if a.mode == rwRead && st.mine == rwWrite {
		a.g.Readers = 1
	}
	_, err := a.tx.ExecContext(a.ctx, "UPDATE "+a.s.n.rwHolds+" SET mode = ?, expires_at = GREATEST(expires_at, "+now+" + INTERVAL ? MICROSECOND)"+
		" WHERE name = ? AND owner = ?", a.mode, a.ttl.Microseconds(), a.key, a.d)
	return err == nil, err
}

// admitReader adds a read holding unless a writer holds the key or a mark
// is live.
func (a *rwTx) admitReader(st rwState) (bool, error) {
	switch {
	case st.writers > 0:
		a.refusal = st.taken(false)
		return false, nil
	case st.markUS >= 0:
		a.refusal = st.taken(true)
		return false, nil
	}
	a.g.Readers = st.readers + 1
	return a.insert()
}

// admitWriter adds the write holding if no holding is live (ending the
// caller's own mark), else sets the mark to the caller and commits that.
func (a *rwTx) admitWriter(st rwState) (bool, error) {
	K := a.s.n.rwKeys
	if st.readers+st.writers > 0 && a.s.rwNoMark {
		a.refusal = st.taken(false)
		return false, nil
	}
	if st.readers+st.writers > 0 {
		_, err := a.tx.ExecContext(a.ctx, "UPDATE "+K+" SET mark_owner = ?, mark_until = "+now+" + INTERVAL ? MICROSECOND WHERE name = ?",
			a.d, driver.WriterWaitTTL.Microseconds(), a.key)
		st.markUS = driver.WriterWaitTTL.Microseconds()
		a.refusal = st.taken(false)
		return err == nil, err
	}
	if st.markMine {
		if _, err := a.tx.ExecContext(a.ctx, "UPDATE "+K+" SET mark_owner = NULL, mark_until = '1970-01-01' WHERE name = ?", a.key); err != nil {
			return false, err
		}
	}
	return a.insert()
}

// insert adds the token's holding with the next fence (over its own
// expired row if one is left: WithoutRWPrune's control keeps them).
func (a *rwTx) insert() (bool, error) {
	err := a.tx.QueryRowContext(a.ctx, "INSERT INTO "+a.s.n.rwHolds+" (name, owner, mode, fence, expires_at)"+
		" VALUES (?, ?, ?, NEXTVAL("+a.s.n.fence+"), "+now+" + INTERVAL ? MICROSECOND)"+
		" ON DUPLICATE KEY UPDATE mode = VALUES(mode), fence = VALUES(fence), expires_at = VALUES(expires_at) RETURNING fence",
		a.key, a.d, a.mode, a.ttl.Microseconds()).Scan(&a.g.Fence)
	return err == nil, err
}
