package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

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
	if !s.noFenceCheck { // the owner's completion: one UPDATE, which locks the row
		r, err := tx.ExecContext(ctx, s.completeSQL()+" AND fence = ? AND done = 0 AND forget_at > "+now, result, []byte(id.Scope), []byte(id.Key), fence)
		if err != nil {
			return wrap("complete record in the transaction", err)
		}
		if n, err := r.RowsAffected(); err == nil && n == 1 {
			return nil
		}
	}
	refusal, err := s.ownedTx(ctx, tx, id, fence) // why not, or the control's completion
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

// DB returns the *sql.DB the store runs on (the one given to New). The
// store keeps using it: do not close it while the store is in use. Package
// myguard begins the guard's transactions on it.
func (s *Store) DB() *sql.DB { return s.db }
