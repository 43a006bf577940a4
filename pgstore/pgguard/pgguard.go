// Package pgguard runs an idempotency guard's function in one PostgreSQL
// transaction with the completion of its record (the guard's SQL mode):
// the function's writes and the record's result commit together. It is a
// package of its own so that pgstore does not import package dlock.
package pgguard

import (
	"context"
	"fmt"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5"
)

// DoTx runs fn once for key under g, in one transaction with the
// completion of key's idempotency record: fn's writes through tx and the
// record's result commit together, or not at all. g must be a Guard on s
// (dlock.NewGuard(s, ...)), and s a store made by pgstore.New (the transaction is
// begun on its pool).
//
// The steps: the record is begun by g in a statement of its own (a replay,
// an in-flight answer or a mismatch end there, as for Guard.Do); then a
// transaction is begun, fn runs in it, and, in the same transaction,
// s.CompleteRecordTx checks under the record's row lock that this execution
// (its fence) still owns the record and stores the result; then commit.
// The record's lease is renewed meanwhile (unless g was made WithTTL), and
// fn's ctx is cancelled if it is lost.
//
// What is exactly once: writes made through tx. An executor that dies
// before the commit leaves nothing of them (the server rolls back); a
// later call takes the record over once its lease passes and runs fn
// again. An executor paused past its lease and taken over fails its
// fence check: its transaction is rolled back and DoTx returns an error
// matching dlock.ErrLost and driver.ErrStaleFence. What is not: effects
// outside the database (send those with Execution.DownstreamKey), and
// writes fn makes through other connections.
//
// If fn returns an error, the transaction is rolled back, the record
// abandoned, and DoTx returns the error. A commit whose outcome is unknown
// (the connection broke) returns an error matching no sentinel: a retry
// replays the result if the commit landed, or runs fn again. A result over
// driver.MaxResultLen is a *driver.ResultTooLargeError: rolled back. A nil
// g or fn, a Guard on another store or a store made by pgstore.NewDB match
// driver.ErrInvalid before any I/O.
func DoTx(ctx context.Context, s *pgstore.Store, g *dlock.Guard, key, fingerprint string, fn func(ctx context.Context, tx pgx.Tx, e dlock.Execution) ([]byte, error)) (dlock.Result, error) {
	if s == nil || g == nil || fn == nil {
		return dlock.Result{}, fmt.Errorf("%w: pgguard: DoTx: nil store, guard or function", driver.ErrInvalid)
	}
	if st, _ := g.Store().(*pgstore.Store); st != s {
		return dlock.Result{}, fmt.Errorf("%w: pgguard: DoTx: the guard keeps its records in another store", driver.ErrInvalid)
	}
	pool := s.Pool()
	if pool == nil {
		return dlock.Result{}, fmt.Errorf("%w: pgguard: DoTx needs a store made by pgstore.New (a pgx pool); with NewDB, call CompleteRecordSQLTx in your transaction within Guard.DoTx", driver.ErrInvalid)
	}
	return g.DoTx(ctx, key, fingerprint, func(fctx context.Context, e dlock.Execution) ([]byte, error) {
		tx, err := pool.Begin(fctx)
		if err != nil {
			return nil, fmt.Errorf("pgguard: begin the transaction: %w", err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // nothing after a commit
		res, err := fn(fctx, tx, e)
		if err != nil {
			return nil, err
		}
		// The completion and the commit run on ctx, not fctx: after a lost
		// lease the fence check decides, under the row lock.
		if err := s.CompleteRecordTx(ctx, tx, driver.RecordID{Scope: e.Scope, Key: e.Key}, e.Fence, res); err != nil {
			return nil, err
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, fmt.Errorf("pgguard: commit: %w", err)
		}
		return res, nil
	})
}
