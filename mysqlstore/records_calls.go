package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// ownerCall runs mutation (its arguments args, then scope and name) in a
// transaction if token and fence own id's record; resentOK answers nil to
// a completion done before by them.
func (s *Store) ownerCall(ctx context.Context, op string, id driver.RecordID, token string, fence uint64, resentOK bool, mutation string, args ...any) error {
	var refusal error
	err := s.inTx(ctx, op, func(tx *sql.Tx) (bool, error) {
		var err error
		if refusal, err = s.owned(ctx, tx, id, digest(token), fence); err != nil {
			return false, err
		}
		if errors.Is(refusal, errResent) {
			if refusal = nil; !resentOK {
				refusal = driver.StaleExecutor(true)
			}
			return false, nil
		}
		if refusal != nil {
			return false, nil
		}
		_, err = tx.ExecContext(ctx, mutation, append(args, []byte(id.Scope), []byte(id.Key))...)
		return err == nil, err
	})
	if err != nil {
		return err
	}
	return refusal
}

// completeSQL completes the record of a scope and name, storing the result.
func (s *Store) completeSQL() string {
	return "UPDATE " + s.n.idem + " SET done = 1, result = ?, lease_ends = " + now + ", forget_at = " + now +
		" + INTERVAL keep_us MICROSECOND WHERE scope = ? AND name = ?"
}

// CompleteRecord implements driver.Idempotency in one transaction: the
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
	if err := s.checkRecord(ctx); err != nil {
		return err
	}
	return s.ownerCall(ctx, "complete record", id, token, fence, true, s.completeSQL(), result)
}

// AbandonRecord implements driver.Idempotency in one transaction (the
// owned in-flight row is deleted). A repeated abandon finds the record
// gone: the stale-executor error with ErrExpired. Other errors as
// BeginRecord.
func (s *Store) AbandonRecord(ctx context.Context, id driver.RecordID, token string, fence uint64) error {
	if err := driver.ValidateRecordCall(id, token, 1); err != nil {
		return err
	}
	if err := s.checkRecord(ctx); err != nil {
		return err
	}
	return s.ownerCall(ctx, "abandon record", id, token, fence, false, "DELETE FROM "+s.n.idem+" WHERE scope = ? AND name = ?")
}

// ExtendRecord implements driver.Idempotency in one transaction; errors as
// BeginRecord.
func (s *Store) ExtendRecord(ctx context.Context, id driver.RecordID, token string, fence uint64, lease time.Duration) error {
	if err := driver.ValidateRecordCall(id, token, lease); err != nil {
		return err
	}
	if err := s.checkRecord(ctx); err != nil {
		return err
	}
	us := lease.Microseconds() + boolInt(lease%time.Microsecond != 0)
	return s.ownerCall(ctx, "extend record", id, token, fence, false, "UPDATE "+s.n.idem+" SET lease_ends = "+now+" + INTERVAL ? MICROSECOND,"+
		" forget_at = "+now+" + INTERVAL ? MICROSECOND + INTERVAL keep_us MICROSECOND WHERE scope = ? AND name = ?", us, us)
}

// CompleteRecordTx completes id's in-flight record of the execution fence
// (dlock.Execution.Fence) within tx, so that the completion commits or
// rolls back with tx's other writes. It locks the record's row (SELECT ...
// FOR UPDATE, which reads the latest committed version at any isolation
// level) until tx ends: a takeover begun meanwhile waits for the commit
// and then finds the record completed; a takeover that committed first
// makes it fail with the stale-executor error (driver.ErrStaleFence and
// driver.ErrTaken, or driver.ErrExpired when the record is gone), and the
// caller must roll tx back. Bad arguments match driver.ErrInvalid before
// any I/O.
func (s *Store) CompleteRecordTx(ctx context.Context, tx *sql.Tx, id driver.RecordID, fence uint64, result []byte) error {
	if tx == nil {
		return fmt.Errorf("%w: mysqlstore: nil transaction", driver.ErrInvalid)
	}
	if err := driver.ValidateRecordCall(id, "t", 1); err != nil {
		return err
	}
	if err := driver.ValidateResult(result); err != nil {
		return err
	}
	if err := s.checkRecord(ctx); err != nil {
		return err
	}
	refusal, err := s.ownedTx(ctx, tx, id, fence)
	if err != nil {
		return wrap("complete record in the transaction", err)
	}
	if refusal != nil {
		return refusal
	}
	if _, err := tx.ExecContext(ctx, s.completeSQL(), result, []byte(id.Scope), []byte(id.Key)); err != nil {
		return wrap("complete record in the transaction", err)
	}
	return nil
}

// ownedTx is the in-transaction completion's check: fence, any owner
// (none at all for a store of a negative control, see export_test.go).
func (s *Store) ownedTx(ctx context.Context, tx *sql.Tx, id driver.RecordID, fence uint64) (refusal, err error) {
	if s.noFenceCheck {
		return nil, nil
	}
	return s.owned(ctx, tx, id, nil, fence)
}

// DoTx runs fn once for key under g, in one transaction with the
// completion of key's idempotency record: fn's writes through tx and the
// record's result commit together, or not at all. g must be a Guard on s
// (dlock.NewGuard(s, ...)). The transaction is begun on s's *sql.DB at
// the server's default isolation level.
//
// The steps, what is exactly once and the errors are those of
// pgstore.Store.DoTx: the record is begun by g in a transaction of its
// own; fn runs in a new transaction; CompleteRecordTx checks there, under
// the record's row lock, that this execution's fence still owns the record
// and stores the result; then commit. Writes through tx are exactly once:
// an executor that dies before its commit leaves none of them, and a
// later call takes over after the lease; a stale executor's fence check
// fails (dlock.ErrLost, driver.ErrStaleFence) and its writes are rolled
// back. Effects outside the database are not (use
// Execution.DownstreamKey). A nil g or fn, or a Guard on another store,
// match driver.ErrInvalid before any I/O.
func (s *Store) DoTx(ctx context.Context, g *dlock.Guard, key, fingerprint string, fn func(ctx context.Context, tx *sql.Tx, e dlock.Execution) ([]byte, error)) (dlock.Result, error) {
	if g == nil || fn == nil {
		return dlock.Result{}, fmt.Errorf("%w: mysqlstore: DoTx: nil guard or function", driver.ErrInvalid)
	}
	if st, _ := g.Store().(*Store); st != s {
		return dlock.Result{}, fmt.Errorf("%w: mysqlstore: DoTx: the guard keeps its records in another store", driver.ErrInvalid)
	}
	return g.DoTx(ctx, key, fingerprint, func(fctx context.Context, e dlock.Execution) ([]byte, error) {
		// The transaction lives on ctx, not fctx: database/sql rolls back
		// a transaction whose context ends, and after a lost lease the
		// fence check decides, under the row lock.
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, wrap("begin the transaction", err)
		}
		defer func() { _ = tx.Rollback() }() // nothing after a commit
		res, err := fn(fctx, tx, e)
		if err != nil {
			return nil, err
		}
		if err := s.CompleteRecordTx(ctx, tx, driver.RecordID{Scope: e.Scope, Key: e.Key}, e.Fence, res); err != nil {
			return nil, err
		}
		if err := tx.Commit(); err != nil {
			return nil, wrap("commit", err)
		}
		return res, nil
	})
}
