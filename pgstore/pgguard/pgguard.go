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

// TwoStep makes DoTx begin the record in a statement of its own, committed
// before the business transaction (the mode before the folded one): the
// record is then in flight for everyone, with a lease that is renewed
// while fn runs and, if its executor stops, taken over by the next call
// once the lease passes, with a greater fence, while the stopped
// transaction is still open (its commit is then refused). It costs a
// second commit. Choose it for transactions that may stay idle longer than
// the lease should bound, or a pooler that ends idle transactions early.
func TwoStep() Option { return func(o *options) { o.twoStep = true } }

// DoTx runs fn once for key under g, in one transaction with key's
// idempotency record: fn's writes through tx and the record's result
// commit together, or not at all. g must be a Guard on s
// (dlock.NewGuard(s, ...)), and s a store made by pgstore.New (the
// transaction is begun on its pool).
//
// The steps (the folded mode, the default): BEGIN; the record is begun in
// tx (s.BeginRecordTx): a replay, an in-flight answer or a mismatch end
// there, rolled back, as for Guard.Do; fn runs in tx; s.CompleteRecordTx
// stores the result in tx; COMMIT. One commit. Until it, no other call
// sees the execution's record: a concurrent call of key is answered in
// flight (dlock.ErrInFlight) at once, never queued on tx, and an executor
// that dies before its commit leaves nothing, so a retry runs at once. An
// executor that leaves tx idle longer than g's lease (paused, stalled) has
// its session ended by the server (idle_in_transaction_session_timeout)
// and tx rolled back; its commit then fails. The lease is not renewed,
// and fn's ctx is ctx. With TwoStep, the record is begun and committed
// first, then tx runs with the completion (see TwoStep, dlock.Guard.DoTx).
//
// What is exactly once: writes made through tx. What is not: effects
// outside the database (send those with Execution.DownstreamKey), and
// writes fn makes through other connections. Execution.TookOver is true
// only when the call took over a committed in-flight record (of a TwoStep
// or Guard.Do executor); a folded execution that died left no record.
//
// If fn returns an error, tx is rolled back and DoTx returns the error. A
// commit whose outcome is unknown (the connection broke) returns an error
// matching no sentinel: a retry replays the result if the commit landed,
// or runs fn again. A result over driver.MaxResultLen is a
// *driver.ResultTooLargeError: rolled back. A refused completion (a
// TwoStep execution taken over) matches dlock.ErrLost and
// driver.ErrStaleFence: rolled back. A nil g or fn, a Guard on another
// store or a store made by pgstore.NewDB match driver.ErrInvalid before
// any I/O.
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
