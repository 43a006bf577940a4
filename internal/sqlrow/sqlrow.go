// Package sqlrow runs a function in a database/sql transaction holding a
// row lock (SELECT ... FOR UPDATE), the flow both SQL stores' row locks
// share (pgstore.WithRowLockDB, mysqlstore.WithRowLock): the row is
// created on first use by a statement of its own, outside the transaction;
// the function's transaction commits when it returns nil and rolls back
// when it fails or panics. The statements and the errors are the
// dialect's.
package sqlrow

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Starter is what Run needs of a *sql.DB or a *sql.Conn.
type Starter interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Dialect is what differs between the stores.
type Dialect struct {
	// Tx are the transaction's options (nil: the driver's default).
	Tx *sql.TxOptions
	// Lock locks the row in tx; found is false when it has none.
	Lock func(ctx context.Context, tx *sql.Tx) (found bool, err error)
	// Create creates the missing row on c, autocommitted.
	Create func(ctx context.Context, c Starter) error
	// Err classifies an error got before fn ran; op is "begin", "lock" or
	// "create row".
	Err func(op string, err error) error
	// Commit classifies a failed COMMIT (its outcome is unknown).
	Commit func(err error) error
	// Vanished is returned when the row created is not found.
	Vanished error
}

// Run begins a transaction on c, locks the row in it and runs fn, then
// commits, or rolls back if fn fails or panics (the panic goes on), and
// returns fn's error (joined with the rollback's, if that failed too). A
// missing row is created after that transaction is rolled back, and a new
// one begins: a first use never needs a second connection while its
// transaction holds one.
func Run(ctx context.Context, c Starter, d Dialect, fn func(*sql.Tx) error) error {
	for created := false; ; created = true {
		tx, err := c.BeginTx(ctx, d.Tx)
		if err != nil {
			return d.Err("begin", err)
		}
		found, err := d.Lock(ctx, tx)
		if err != nil || !found {
			_ = tx.Rollback()
			switch {
			case err != nil:
				return d.Err("lock", err)
			case created:
				return d.Vanished
			}
			if err := d.Create(ctx, c); err != nil {
				return d.Err("create row", err)
			}
			continue // a new transaction sees the row whatever its isolation
		}
		return finish(tx, d, fn)
	}
}

// finish runs fn in tx: commit on nil, rollback on an error or a panic.
func finish(tx *sql.Tx, d Dialect, fn func(*sql.Tx) error) error {
	done := false
	defer func() {
		if !done {
			_ = tx.Rollback() // a panic: the row is not kept locked
		}
	}()
	err := fn(tx)
	done = true
	if err != nil {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			return errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return d.Commit(err)
	}
	return nil
}
