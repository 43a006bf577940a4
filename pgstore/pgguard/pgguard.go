// Package pgguard runs an idempotency guard's function in one PostgreSQL
// transaction with its record (the guard's SQL mode): the function's
// writes and the record's result commit together. It is a package of its
// own so that pgstore does not import package dlock.
package pgguard

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5"
)

// Option configures DoTx.
type Option func(*options)

type options struct{ twoStep bool }

// TwoStep makes DoTx begin the record in a statement of its own,
// committed before the business transaction: the record is then visible
// in flight, its lease renewed, and taken over once the lease passes even
// while a paused executor's transaction is open (whose commit is then
// refused). It costs a second commit; a dead executor blocks the key for
// its lease.
func TwoStep() Option { return func(o *options) { o.twoStep = true } }

// DoTx runs fn once for key under g, in one transaction with key's
// idempotency record: fn's writes through tx and the record commit
// together, or not at all. g must be a Guard on s, made by pgstore.New.
//
// By default the record is begun in tx (s.BeginRecordTx), so one commit
// ends the call: a concurrent call of key gets dlock.ErrInFlight at once,
// an executor that dies before its commit leaves nothing (a retry runs at
// once), and one idle in tx for longer than g's lease is ended by the
// server. With TwoStep the record is begun and committed first, as
// dlock.Guard.DoTx does. See docs/idempotency.md, "The SQL mode".
//
// Writes through tx happen exactly once; effects outside the database do
// not (use Execution.DownstreamKey). If fn fails, tx is rolled back and
// DoTx returns fn's error. A commit whose outcome is unknown returns an
// error matching no sentinel; a refused completion (a taken-over TwoStep
// execution) matches dlock.ErrLost and driver.ErrStaleFence; a result over
// driver.MaxResultLen is a *driver.ResultTooLargeError. A nil argument, a
// Guard on another store or a store made by NewDB match driver.ErrInvalid
// before any I/O.
func DoTx(ctx context.Context, s *pgstore.Store, g *dlock.Guard, key, fingerprint string, fn func(ctx context.Context, tx pgx.Tx, e dlock.Execution) ([]byte, error), opts ...Option) (dlock.Result, error) {
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
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.twoStep {
		return g.DoTx(ctx, key, fingerprint, func(fctx context.Context, e dlock.Execution) ([]byte, error) {
			tx, err := pool.Begin(fctx)
			if err != nil {
				return nil, fmt.Errorf("pgguard: begin the transaction: %w", err)
			}
			// The completion and the commit run on ctx, not fctx: after a
			// lost lease the fence check decides, under the row lock.
			return runTx(ctx, fctx, s, tx, e, fn)
		})
	}
	var tx pgx.Tx // the transaction begin left open
	begin := func(bctx context.Context, id driver.RecordID, token, fp string, lease, keep time.Duration) (driver.RecordBegin, error) {
		var err error
		if tx, err = pool.Begin(bctx); err != nil {
			return driver.RecordBegin{}, fmt.Errorf("pgguard: begin the transaction: %w", err)
		}
		b, err := s.BeginRecordTx(bctx, tx, id, token, fp, lease, keep)
		if err != nil || b.State != driver.RecordStarted {
			_ = tx.Rollback(context.WithoutCancel(bctx))
		}
		return b, err
	}
	return g.DoFolded(ctx, key, fingerprint, begin, func(fctx context.Context, e dlock.Execution) ([]byte, error) {
		return runTx(fctx, fctx, s, tx, e, fn)
	})
}

// runTx runs fn in tx on fctx, completes e's record in tx and commits on
// ctx; tx is rolled back on any error.
func runTx(ctx, fctx context.Context, s *pgstore.Store, tx pgx.Tx, e dlock.Execution, fn func(context.Context, pgx.Tx, dlock.Execution) ([]byte, error)) ([]byte, error) {
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // nothing after a commit
	res, err := fn(fctx, tx, e)
	if err != nil {
		return nil, err
	}
	if err := s.CompleteRecordTx(ctx, tx, driver.RecordID{Scope: e.Scope, Key: e.Key}, e.Fence, res); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("pgguard: commit: %w", err)
	}
	return res, nil
}
