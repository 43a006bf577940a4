package pgstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// The idempotency records (driver.Idempotency): one row per record in
// <prefix>_idempotency (recordsTemplate shows the table and the begin
// function), fences from the lease table's sequence, leases and retention
// on the database clock. Each call is one statement, one round trip once
// prepared; the completion can also run inside the caller's transaction
// (CompleteRecordTx, DoTx), committing with the business writes.

var _ driver.Idempotency = (*Store)(nil)

// recordStatements are the records' SQL for one set of names.
type recordStatements struct {
	begin, beginTx, complete, abandon, extend, completeTx, sweep string
}

// ts is the time of a record statement: the client statement's start on
// the database clock.
const ts = `statement_timestamp()`

// ownerChecked wraps mutation (an UPDATE or DELETE of the records table
// aliased i, owned rows only) so that the statement answers 0 when it
// changed the row, else the stale-executor cause: 0 again when resent
// holds of the row (a completion done before), -2 when a live record
// belongs to another execution (taken), -1 when there is none (gone).
func ownerChecked(table, mutation, resent string) string {
	return fmt.Sprintf(`WITH u AS (%[2]s RETURNING 1)
SELECT CASE WHEN EXISTS (SELECT 1 FROM u) THEN 0
  ELSE coalesce((SELECT CASE WHEN %[3]s THEN 0 ELSE -2 END FROM %[1]s AS i
                 WHERE i.scope = $1 AND i.key = $2 AND i.forget_at > `+ts+`), -1) END`, table, mutation, resent)
}

func newRecordStatements(n names) recordStatements {
	T := n.idem
	owned := `i.scope = $1 AND i.key = $2 AND i.owner = $3 AND i.fence = $4 AND NOT i.done AND i.forget_at > ` + ts
	us := ` * interval '1 microsecond'`
	return recordStatements{
		begin:   fmt.Sprintf(`SELECT o_status, o_fence, o_remaining_us, o_took, o_result FROM %s($1, $2, $3, $4, $5, $6)`, n.beginRecord),
		beginTx: fmt.Sprintf(`SELECT o_status, o_fence, o_remaining_us, o_took, o_result FROM %s($1, $2, $3, $4, $5, $6)`, n.beginRecordTx),
		complete: ownerChecked(T, `UPDATE `+T+` AS i SET done = true, result = $5, lease_ends = `+ts+`, forget_at = `+ts+` + i.keep_us`+us+`
  WHERE `+owned, `i.done AND i.owner = $3 AND i.fence = $4`),
		abandon: ownerChecked(T, `DELETE FROM `+T+` AS i WHERE `+owned, `false`),
		extend: ownerChecked(T, `UPDATE `+T+` AS i SET lease_ends = `+ts+` + $5::bigint`+us+`,
  forget_at = `+ts+` + $5::bigint`+us+` + i.keep_us`+us+` WHERE `+owned, `false`),
		// completeTx runs in the caller's transaction: the UPDATE takes the
		// record's row lock (held to the transaction's end, so a takeover
		// waits for the commit and then finds the record completed) and
		// re-checks the fence on the row's latest version. The fence alone
		// names the execution: fences come from one sequence.
		completeTx: ownerChecked(T, `UPDATE `+T+` AS i SET done = true, result = $4, lease_ends = `+ts+`, forget_at = `+ts+` + i.keep_us`+us+`
  WHERE i.scope = $1 AND i.key = $2 AND i.fence = $3 AND NOT i.done AND i.forget_at > `+ts, `false`),
		// sweep deletes up to $1 forgotten records, skipping locked rows;
		// the DELETE re-checks forget_at on a row extended meanwhile.
		sweep: fmt.Sprintf(`DELETE FROM %[1]s AS i USING (
  SELECT scope, key FROM %[1]s WHERE forget_at <= `+ts+` LIMIT $1 FOR UPDATE SKIP LOCKED
) AS c WHERE i.scope = c.scope AND i.key = c.key AND i.forget_at <= `+ts, T),
	}
}

// checkRecord refuses, before any I/O, what driver.ValidateRecordCall
// accepts and PostgreSQL's text cannot hold (a NUL byte in the key or the
// scope), a closed store and a done ctx.
func (s *Store) checkRecord(ctx context.Context, id driver.RecordID) error {
	if err := s.check(id.Key, time.Millisecond); err != nil {
		return err
	}
	if strings.IndexByte(id.Scope, 0) >= 0 {
		return fmt.Errorf("%w: pgstore: scope holds a NUL byte, which PostgreSQL text cannot store", driver.ErrInvalid)
	}
	return ctx.Err()
}

// BeginRecord implements driver.Idempotency in one statement, a call of
// the schema's <prefix>_idempotency_begin: under the record's row lock it
// creates the record (fence from the sequence), takes over one whose lease
// has passed (a greater fence), or answers in flight, completed or a
// *driver.FingerprintMismatchError, changing nothing. Bad arguments
// (driver.ValidateRecord, a NUL byte in the key or scope, a closed store)
// match driver.ErrInvalid and a done ctx returns its error, before any
// I/O; a missing function (run Migrate) matches driver.ErrRefused; an
// error matching no sentinel leaves the outcome unknown.
func (s *Store) BeginRecord(ctx context.Context, id driver.RecordID, token, fingerprint string, lease, retention time.Duration) (driver.RecordBegin, error) {
	return s.begin(ctx, id, token, fingerprint, lease, retention, func(args []any, dest ...any) error {
		return s.db.queryRow(ctx, s.rsql.begin, args, dest...)
	})
}

// BeginRecordTx is BeginRecord within tx (the folded SQL mode,
// pgguard.DoTx): the record begun is tx's, seen by no other call before
// the commit. It never waits for another BeginRecordTx: a record held by
// one is answered in flight at once (Remaining negative), or replayed
// once committed and completed. When started, tx's idle time is bounded
// by lease (idle_in_transaction_session_timeout). Complete the record in
// tx and commit, or roll back (always, on any other answer or an error).
// Errors as BeginRecord.
func (s *Store) BeginRecordTx(ctx context.Context, tx pgx.Tx, id driver.RecordID, token, fingerprint string, lease, retention time.Duration) (driver.RecordBegin, error) {
	if tx == nil {
		return driver.RecordBegin{}, fmt.Errorf("%w: pgstore: nil transaction", driver.ErrInvalid)
	}
	return s.begin(ctx, id, token, fingerprint, lease, retention, func(args []any, dest ...any) error {
		return tx.QueryRow(ctx, s.rsql.beginTx, args...).Scan(dest...)
	})
}

// BeginRecordSQLTx is BeginRecordTx for a database/sql transaction (a
// store made by NewDB): the begin of a dlock.BeginFunc for
// Guard.DoFolded, whose function then completes the record with
// CompleteRecordSQLTx and commits.
func (s *Store) BeginRecordSQLTx(ctx context.Context, tx *sql.Tx, id driver.RecordID, token, fingerprint string, lease, retention time.Duration) (driver.RecordBegin, error) {
	if tx == nil {
		return driver.RecordBegin{}, fmt.Errorf("%w: pgstore: nil transaction", driver.ErrInvalid)
	}
	return s.begin(ctx, id, token, fingerprint, lease, retention, func(args []any, dest ...any) error {
		return tx.QueryRowContext(ctx, s.rsql.beginTx, args...).Scan(dest...)
	})
}

// begin checks a begin's arguments before any I/O, then calls a begin
// function through query (its arguments args; it scans the row into dest)
// and turns the row into BeginRecord's answer.
func (s *Store) begin(ctx context.Context, id driver.RecordID, token, fingerprint string, lease, retention time.Duration, query func(args []any, dest ...any) error) (driver.RecordBegin, error) {
	if err := driver.ValidateRecord(id, token, fingerprint, lease, retention); err != nil {
		return driver.RecordBegin{}, err
	}
	if err := s.checkRecord(ctx, id); err != nil {
		return driver.RecordBegin{}, err
	}
	s.startSweep()
	var status, fence, remaining int64
	var took bool
	var result []byte
	args := []any{id.Scope, id.Key, digest(token), []byte(fingerprint), micros(lease), micros(retention)}
	if err := query(args, &status, &fence, &remaining, &took, &result); err != nil {
		return driver.RecordBegin{}, wrap("begin record", err)
	}
	rem := time.Duration(remaining) * time.Microsecond
	if remaining < 0 {
		rem = -1
	}
	switch status {
	case 1:
		return driver.RecordBegin{State: driver.RecordStarted, Fence: uint64(fence), TookOver: took, Remaining: rem}, nil
	case 2:
		return driver.RecordBegin{State: driver.RecordInFlight, Fence: uint64(fence), Remaining: rem}, nil
	case 3:
		if len(result) == 0 {
			result = nil
		}
		return driver.RecordBegin{State: driver.RecordCompleted, Fence: uint64(fence), Remaining: rem, Result: result}, nil
	case -1:
		st := driver.RecordInFlight
		if took {
			st = driver.RecordCompleted
		}
		return driver.RecordBegin{}, &driver.FingerprintMismatchError{State: st}
	}
	return driver.RecordBegin{}, fmt.Errorf("pgstore: begin record: unexpected status %d", status)
}

// ownerAnswer turns an ownerChecked statement's answer into the
// stale-executor errors of driver.Idempotency.
func ownerAnswer(op string, n int64, err error) error {
	switch {
	case err != nil:
		return wrap(op, err)
	case n == 0:
		return nil
	case n == -1:
		return driver.StaleExecutor(false)
	}
	return driver.StaleExecutor(true)
}

// CompleteRecord implements driver.Idempotency in one statement: the
// record becomes completed with result, kept for its retention from now,
// if token and fence own it in flight. A result over driver.MaxResultLen
// is a *driver.ResultTooLargeError before any I/O; other errors as
// BeginRecord.
func (s *Store) CompleteRecord(ctx context.Context, id driver.RecordID, token string, fence uint64, result []byte) error {
	if err := driver.ValidateRecordCall(id, token, 1); err != nil {
		return err
	}
	if err := driver.ValidateResult(result); err != nil {
		return err
	}
	if err := s.checkRecord(ctx, id); err != nil {
		return err
	}
	var n int64
	err := s.db.queryRow(ctx, s.rsql.complete, []any{id.Scope, id.Key, digest(token), int64(fence), result}, &n)
	return ownerAnswer("complete record", n, err)
}

// AbandonRecord implements driver.Idempotency in one statement (a DELETE
// of the owned in-flight row). A repeated abandon finds the record gone:
// the stale-executor error with ErrExpired. Other errors as BeginRecord.
func (s *Store) AbandonRecord(ctx context.Context, id driver.RecordID, token string, fence uint64) error {
	if err := driver.ValidateRecordCall(id, token, 1); err != nil {
		return err
	}
	if err := s.checkRecord(ctx, id); err != nil {
		return err
	}
	var n int64
	err := s.db.queryRow(ctx, s.rsql.abandon, []any{id.Scope, id.Key, digest(token), int64(fence)}, &n)
	return ownerAnswer("abandon record", n, err)
}

// ExtendRecord implements driver.Idempotency in one statement; errors as
// BeginRecord.
func (s *Store) ExtendRecord(ctx context.Context, id driver.RecordID, token string, fence uint64, lease time.Duration) error {
	if err := driver.ValidateRecordCall(id, token, lease); err != nil {
		return err
	}
	if err := s.checkRecord(ctx, id); err != nil {
		return err
	}
	var n int64
	err := s.db.queryRow(ctx, s.rsql.extend, []any{id.Scope, id.Key, digest(token), int64(fence), micros(lease)}, &n)
	return ownerAnswer("extend record", n, err)
}

// CompleteRecordTx completes id's in-flight record of the execution fence
// (dlock.Execution.Fence) within tx, so that the completion commits or
// rolls back with the transaction's other writes. Its UPDATE locks the
// record's row until tx ends: a takeover begun meanwhile waits for the
// commit and then finds the record completed; a takeover that committed
// first makes it fail with the stale-executor error (driver.ErrStaleFence
// and driver.ErrTaken, or driver.ErrExpired when the record is gone), and
// the caller must roll tx back. Bad arguments match driver.ErrInvalid
// before any I/O. Under REPEATABLE READ or SERIALIZABLE a record changed
// since tx's snapshot is a serialization failure (roll back; nothing is
// completed).
func (s *Store) CompleteRecordTx(ctx context.Context, tx pgx.Tx, id driver.RecordID, fence uint64, result []byte) error {
	if tx == nil {
		return fmt.Errorf("%w: pgstore: nil transaction", driver.ErrInvalid)
	}
	return s.completeIn(ctx, id, fence, result, func(args []any, n *int64) error {
		return tx.QueryRow(ctx, s.rsql.completeTx, args...).Scan(n)
	})
}

// CompleteRecordSQLTx is CompleteRecordTx for a database/sql transaction
// (a store made by NewDB, any driver with $1 placeholders).
func (s *Store) CompleteRecordSQLTx(ctx context.Context, tx *sql.Tx, id driver.RecordID, fence uint64, result []byte) error {
	if tx == nil {
		return fmt.Errorf("%w: pgstore: nil transaction", driver.ErrInvalid)
	}
	return s.completeIn(ctx, id, fence, result, func(args []any, n *int64) error {
		return tx.QueryRowContext(ctx, s.rsql.completeTx, args...).Scan(n)
	})
}

// completeIn validates a completion's arguments before any I/O and runs
// the in-transaction completion through query, which scans its answer into
// n.
func (s *Store) completeIn(ctx context.Context, id driver.RecordID, fence uint64, result []byte, query func(args []any, n *int64) error) error {
	if err := driver.ValidateRecordCall(id, "t", 1); err != nil {
		return err
	}
	if err := driver.ValidateResult(result); err != nil {
		return err
	}
	if err := s.checkRecord(ctx, id); err != nil {
		return err
	}
	var n int64
	err := query([]any{id.Scope, id.Key, int64(fence), result}, &n)
	return ownerAnswer("complete record in the transaction", n, err)
}
