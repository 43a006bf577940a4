// Package myguard runs an idempotency guard's function in one MariaDB
// transaction with its record (the guard's SQL mode): the function's
// writes and the record's result commit together. It is a package of its
// own so that mysqlstore does not import package dlock.
package myguard

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// Option configures DoTx.
type Option func(*options)

type options struct{ twoStep bool }

// TwoStep makes DoTx begin the record in a transaction of its own,
// committed before the business transaction, as pgguard.TwoStep does.
func TwoStep() Option { return func(o *options) { o.twoStep = true } }

// DoTx runs fn once for key under g, in one transaction with key's
// idempotency record, begun on s's *sql.DB at the server's default
// isolation: fn's writes through tx and the record commit together, or not
// at all. g must be a Guard on s.
//
// By default the record is begun in tx (s.BeginRecordTx), as by
// pgguard.DoTx: one commit, a concurrent call in flight at once, nothing
// left by an executor that dies before its commit. An executor idle in tx
// is ended only by the session's idle_transaction_timeout (set it in the
// DSN; see docs/mysql.md). With TwoStep the record is begun and committed
// first. Results and errors are pgguard.DoTx's; a nil argument or a Guard
// on another store match driver.ErrInvalid before any I/O.
func DoTx(ctx context.Context, s *mysqlstore.Store, g *dlock.Guard, key, fingerprint string, fn func(ctx context.Context, tx *sql.Tx, e dlock.Execution) ([]byte, error), opts ...Option) (dlock.Result, error) {
	if s == nil || g == nil || fn == nil {
		return dlock.Result{}, fmt.Errorf("%w: myguard: DoTx: nil store, guard or function", driver.ErrInvalid)
	}
	if st, _ := g.Store().(*mysqlstore.Store); st != s {
		return dlock.Result{}, fmt.Errorf("%w: myguard: DoTx: the guard keeps its records in another store", driver.ErrInvalid)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	db := s.DB()
	if o.twoStep {
		return g.DoTx(ctx, key, fingerprint, func(fctx context.Context, e dlock.Execution) ([]byte, error) {
			// The transaction lives on ctx, not fctx: database/sql rolls
			// back a transaction whose context ends, and after a lost
			// lease the fence check decides, under the row lock.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return nil, fmt.Errorf("myguard: begin the transaction: %w", err)
			}
			return runTx(ctx, fctx, s, tx, e, fn)
		})
	}
	var tx *sql.Tx // the transaction begin left open
	begin := func(bctx context.Context, id driver.RecordID, token, fp string, lease, keep time.Duration) (driver.RecordBegin, error) {
		var err error
		if tx, err = db.BeginTx(ctx, nil); err != nil { // on ctx: bctx ends with a wait
			return driver.RecordBegin{}, fmt.Errorf("myguard: begin the transaction: %w", err)
		}
		b, err := s.BeginRecordTx(bctx, tx, id, token, fp, lease, keep)
		if err != nil || b.State != driver.RecordStarted {
			_ = tx.Rollback()
		}
		return b, err
	}
	return g.DoFolded(ctx, key, fingerprint, begin, func(fctx context.Context, e dlock.Execution) ([]byte, error) {
		return runTx(ctx, fctx, s, tx, e, fn)
	})
}

// runTx runs fn in tx on fctx, completes e's record in tx and commits on
// ctx; tx is rolled back on any error.
func runTx(ctx, fctx context.Context, s *mysqlstore.Store, tx *sql.Tx, e dlock.Execution, fn func(context.Context, *sql.Tx, dlock.Execution) ([]byte, error)) ([]byte, error) {
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
}
