// Package myguard runs an idempotency guard's function in one MariaDB
// transaction with the completion of its record (the guard's SQL mode):
// the function's writes and the record's result commit together. It is a
// package of its own so that mysqlstore does not import package dlock.
package myguard

import (
	"context"
	"database/sql"
	"fmt"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// DoTx runs fn once for key under g, in one transaction with the
// completion of key's idempotency record: fn's writes through tx and the
// record's result commit together, or not at all. g must be a Guard on s
// (dlock.NewGuard(s, ...)). The transaction is begun on s's *sql.DB at
// the server's default isolation level.
//
// The steps, what is exactly once and the errors are those of
// pgguard.DoTx: the record is begun by g in a transaction of its
// own; fn runs in a new transaction; CompleteRecordTx checks there, under
// the record's row lock, that this execution's fence still owns the record
// and stores the result; then commit. Writes through tx are exactly once:
// an executor that dies before its commit leaves none of them, and a
// later call takes over after the lease; a stale executor's fence check
// fails (dlock.ErrLost, driver.ErrStaleFence) and its writes are rolled
// back. Effects outside the database are not (use
// Execution.DownstreamKey). A nil g or fn, or a Guard on another store,
// match driver.ErrInvalid before any I/O.
func DoTx(ctx context.Context, s *mysqlstore.Store, g *dlock.Guard, key, fingerprint string, fn func(ctx context.Context, tx *sql.Tx, e dlock.Execution) ([]byte, error)) (dlock.Result, error) {
	if s == nil || g == nil || fn == nil {
		return dlock.Result{}, fmt.Errorf("%w: myguard: DoTx: nil store, guard or function", driver.ErrInvalid)
	}
	if st, _ := g.Store().(*mysqlstore.Store); st != s {
		return dlock.Result{}, fmt.Errorf("%w: myguard: DoTx: the guard keeps its records in another store", driver.ErrInvalid)
	}
	db := s.DB()
	return g.DoTx(ctx, key, fingerprint, func(fctx context.Context, e dlock.Execution) ([]byte, error) {
		// The transaction lives on ctx, not fctx: database/sql rolls back
		// a transaction whose context ends, and after a lost lease the
		// fence check decides, under the row lock.
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("myguard: begin the transaction: %w", err)
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
			return nil, fmt.Errorf("myguard: commit: %w", err)
		}
		return res, nil
	})
}
