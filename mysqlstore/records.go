package mysqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"time"

	"example.com/dlock/driver"
)

// The idempotency records (driver.Idempotency) on <p>_idempotency
// (recordsDDL): each call is one READ COMMITTED transaction that locks the
// record's row (SELECT ... FOR UPDATE, which reads the latest committed
// version) and decides here, as memstore does, with the times measured on
// the database clock. Fences come from the lease table's sequence. The
// completion can also run in the caller's transaction (CompleteRecordTx,
// DoTx), committing with the business writes.

var _ driver.Idempotency = (*Store)(nil)

// erDupKey is ER_DUP_ENTRY: a concurrent begin inserted the record first.
const erDupKey = 1062

// recordRow is a record read under its row lock.
type recordRow struct {
	owner, fingerprint, result []byte
	fence                      uint64
	done, took                 bool
	leaseLeft, forgetLeft      time.Duration // until lease_ends, forget_at
}

// queryer is a transaction, the store's or the caller's.
type queryer interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}

// Row lock clauses of lockRecord.
const (
	forUpdate = " FOR UPDATE"
	forShare  = " LOCK IN SHARE MODE"
)

// lockRecord reads id's record and locks its row (lock: forUpdate or
// forShare); nil if there is none.
func (s *Store) lockRecord(ctx context.Context, q queryer, id driver.RecordID, lock string) (*recordRow, error) {
	var r recordRow
	var lease, forget int64
	err := q.QueryRowContext(ctx, "SELECT owner, fingerprint, result, fence, done, TIMESTAMPDIFF(MICROSECOND, "+now+", lease_ends),"+
		" TIMESTAMPDIFF(MICROSECOND, "+now+", forget_at), took FROM "+s.n.idem+" WHERE scope = ? AND name = ?"+lock,
		[]byte(id.Scope), []byte(id.Key)).Scan(&r.owner, &r.fingerprint, &r.result, &r.fence, &r.done, &lease, &forget, &r.took)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	r.leaseLeft, r.forgetLeft = time.Duration(lease)*time.Microsecond, time.Duration(forget)*time.Microsecond
	return &r, err
}

// checkRecord refuses a closed store and a done ctx, before any I/O.
func (s *Store) checkRecord(ctx context.Context) error {
	if s.acquirePrep.isClosed() {
		return errClosedStore
	}
	return ctx.Err()
}

// BeginRecord implements driver.Idempotency in one transaction (four round
// trips to start, three otherwise, with interpolateParams=true): under the
// record's row lock it creates the record (a fence from the sequence),
// starts afresh over a forgotten one, takes over one whose lease has
// passed (a greater fence), or answers in flight, completed or a
// *driver.FingerprintMismatchError, changing nothing. Bad arguments match
// driver.ErrInvalid (also after Close) and a done ctx returns its error,
// before any I/O; a missing table (run Migrate) matches driver.ErrRefused;
// other errors leave the outcome unknown.
func (s *Store) BeginRecord(ctx context.Context, id driver.RecordID, token, fingerprint string, lease, retention time.Duration) (driver.RecordBegin, error) {
	if err := driver.ValidateRecord(id, token, fingerprint, lease, retention); err != nil {
		return driver.RecordBegin{}, err
	}
	if err := s.checkRecord(ctx); err != nil {
		return driver.RecordBegin{}, err
	}
	var b driver.RecordBegin
	var refusal error
	var err error
	for range 3 { // a lost insert race is run again, reading the winner's row
		err = s.inTx(ctx, "begin record", func(tx *sql.Tx) (bool, error) {
			b, refusal = driver.RecordBegin{}, nil
			return s.beginIn(ctx, tx, id, digest(token), []byte(fingerprint), lease, retention, "", &b, &refusal)
		})
		if !errors.Is(err, errDupRecord) {
			break
		}
	}
	s.maybeSweep(ctx)
	switch {
	case err != nil:
		return driver.RecordBegin{}, err
	case refusal != nil:
		return driver.RecordBegin{}, refusal
	}
	return b, nil
}

// errDupRecord is a begin that lost the race to insert the record.
var errDupRecord = errors.New("mysqlstore: the record was inserted meanwhile")

// beginIn is BeginRecord's decision, in tx; it reports whether to commit.
// nowait is "" (BeginRecord: the row locked for update, its writes wait
// for locks) or noWait (BeginRecordTx: the row read under a shared lock,
// its writes refused at once, error 1205, by a lock held).
func (s *Store) beginIn(ctx context.Context, tx *sql.Tx, id driver.RecordID, d, fp []byte, lease, keep time.Duration, nowait string, b *driver.RecordBegin, refusal *error) (bool, error) {
	lock := forUpdate
	if nowait != "" {
		lock = forShare
	}
	r, err := s.lockRecord(ctx, tx, id, lock)
	if err != nil {
		return false, err
	}
	leaseUS, keepUS := ceilMicros(lease), ceilMicros(keep)
	*b = driver.RecordBegin{State: driver.RecordStarted, Remaining: lease}
	switch {
	case r == nil:
		err := s.insertRecord(ctx, tx, id, d, fp, leaseUS, keepUS, nowait, &b.Fence)
		if errNumber(err) == erDupKey {
			return false, errDupRecord
		}
		return err == nil, err
	case r.forgetLeft <= 0: // forgotten: a fresh record
		return s.startRecord(ctx, tx, id, d, fp, leaseUS, keepUS, nowait, b)
	case !bytes.Equal(r.fingerprint, fp):
		st := driver.RecordInFlight
		if r.done {
			st = driver.RecordCompleted
		}
		*refusal = &driver.FingerprintMismatchError{State: st}
		return false, nil
	case r.done:
		*b = driver.RecordBegin{State: driver.RecordCompleted, Fence: r.fence, Remaining: r.forgetLeft, Result: r.result}
		if len(r.result) == 0 {
			b.Result = nil
		}
		return false, nil
	case bytes.Equal(r.owner, d): // a resent begin: the same execution
		b.Fence, b.Remaining, b.TookOver = r.fence, max(r.leaseLeft, lease), r.took
		_, err := tx.ExecContext(ctx, nowait+"UPDATE "+s.n.idem+" SET lease_ends = GREATEST(lease_ends, "+now+" + INTERVAL ? MICROSECOND),"+
			" forget_at = GREATEST(forget_at, lease_ends + INTERVAL keep_us MICROSECOND) WHERE scope = ? AND name = ?",
			leaseUS, []byte(id.Scope), []byte(id.Key))
		return err == nil, err
	case r.leaseLeft > 0:
		*b = driver.RecordBegin{State: driver.RecordInFlight, Fence: r.fence, Remaining: r.leaseLeft}
		return false, nil
	}
	b.TookOver = true
	return s.startRecord(ctx, tx, id, d, fp, leaseUS, keepUS, nowait, b)
}

// insertRecord inserts id's record, a new execution of d, and scans its
// fence; nowait as beginIn.
func (s *Store) insertRecord(ctx context.Context, tx *sql.Tx, id driver.RecordID, d, fp []byte, leaseUS, keepUS int64, nowait string, fence *uint64) error {
	return tx.QueryRowContext(ctx, nowait+"INSERT INTO "+s.n.idem+" (scope, name, owner, fence, fingerprint, done, lease_ends, keep_us, forget_at)"+
		" VALUES (?, ?, ?, NEXTVAL("+s.n.fence+"), ?, 0, "+now+" + INTERVAL ? MICROSECOND, ?, "+now+" + INTERVAL ? MICROSECOND) RETURNING fence",
		[]byte(id.Scope), []byte(id.Key), d, fp, leaseUS, keepUS, leaseUS+keepUS).Scan(fence)
}

// ceilMicros is d in microseconds, rounded up.
func ceilMicros(d time.Duration) int64 { return d.Microseconds() + boolInt(d%time.Microsecond != 0) }

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// startRecord makes the existing row of id a new execution of d with a
// fence from the sequence, remembering b.TookOver; nowait as beginIn.
func (s *Store) startRecord(ctx context.Context, tx *sql.Tx, id driver.RecordID, d, fp []byte, leaseUS, keepUS int64, nowait string, b *driver.RecordBegin) (bool, error) {
	if err := tx.QueryRowContext(ctx, "SELECT NEXTVAL("+s.n.fence+")").Scan(&b.Fence); err != nil {
		return false, err
	}
	_, err := tx.ExecContext(ctx, nowait+"UPDATE "+s.n.idem+" SET owner = ?, fence = ?, fingerprint = ?, done = 0, result = NULL, took = ?,"+
		" lease_ends = "+now+" + INTERVAL ? MICROSECOND, keep_us = ?, forget_at = "+now+" + INTERVAL ? MICROSECOND WHERE scope = ? AND name = ?",
		d, b.Fence, fp, b.TookOver, leaseUS, keepUS, leaseUS+keepUS, []byte(id.Scope), []byte(id.Key))
	return err == nil, err
}

// owned locks id's record in q and returns nil if d (nil: any owner) and
// fence own it in flight, errResent for a completion resent by them, else
// the stale-executor error; err is the database's.
func (s *Store) owned(ctx context.Context, q queryer, id driver.RecordID, d []byte, fence uint64) (refusal, err error) {
	r, err := s.lockRecord(ctx, q, id, forUpdate)
	switch {
	case err != nil:
		return nil, err
	case r == nil || r.forgetLeft <= 0:
		return driver.StaleExecutor(false), nil
	case r.fence != fence || d != nil && !bytes.Equal(r.owner, d):
		return driver.StaleExecutor(true), nil
	case r.done && d != nil:
		return errResent, nil
	case r.done:
		return driver.StaleExecutor(true), nil
	}
	return nil, nil
}

// errResent is a completion by the execution that completed the record.
var errResent = errors.New("mysqlstore: completed by this execution")
