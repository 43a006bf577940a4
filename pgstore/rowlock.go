package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/sqlrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RowLockOptions configure WithRowLock and WithRowLockDB.
type RowLockOptions struct {
	// Table is the schema's prefix (default "dlock"): the rows are in
	// <Table>_rows, created by Migrate.
	Table string
	// NoWait fails at once when another transaction holds the row (SELECT
	// ... FOR UPDATE NOWAIT), with a *driver.ContendedError. Without it the
	// call waits for the row until ctx ends.
	NoWait bool
	// IdleTimeout, if positive, bounds how long the transaction may sit
	// idle (between statements, in fn or in a stalled process) before the
	// server ends its session, which rolls it back and frees the row:
	// idle_in_transaction_session_timeout, set for this transaction in the
	// locking statement (whole milliseconds, at least 1). Without it a
	// holder that stalls (a stopped process, a long GC pause) holds the row
	// until its connection dies; with it the stalled holder's transaction
	// can no longer commit, and the next locker gets the row.
	IdleTimeout time.Duration
}

// rowSQL returns the locking SELECT of opts, and the INSERT that creates a
// missing row; an invalid Table returns an error matching ErrInvalid.
func rowSQL(opts RowLockOptions) (sel, ins string, err error) {
	n, err := namesFor(opts.Table)
	if err != nil {
		return "", "", err
	}
	t := pgx.Identifier{n.rows}.Sanitize()
	sel = "SELECT 1 FROM " + t + " WHERE name = $1 FOR UPDATE"
	if ms := opts.IdleTimeout.Milliseconds(); opts.IdleTimeout > 0 {
		sel = fmt.Sprintf("SELECT length(set_config('idle_in_transaction_session_timeout', '%d', true)) FROM %s WHERE name = $1 FOR UPDATE", max(ms, 1), t)
	}
	if opts.NoWait {
		sel += " NOWAIT"
	}
	return sel, "INSERT INTO " + t + " (name) VALUES ($1) ON CONFLICT (name) DO NOTHING", nil
}

// checkRowKey rejects what a text column cannot hold.
func checkRowKey(key string) error {
	if driver.ValidateKey(key) != nil || strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("%w: pgstore: row lock key must be non-empty UTF-8 of at most %d bytes without NUL", driver.ErrInvalid, driver.MaxKeyLen)
	}
	return nil
}

// WithRowLock runs fn inside a transaction of pool that holds the row lock
// of key (SELECT ... FOR UPDATE on <Table>_rows, the way Quartz and the
// seeds lock), and commits it when fn returns nil: the lock and every write
// fn makes through tx commit or roll back together, so a holder that lost
// its transaction (its connection died, the server restarted, an
// administrator ended it) cannot commit a write at all. The lock is held
// until the transaction ends; there is no lease, renewal or fence.
//
// The row is created on first use by an INSERT ... ON CONFLICT DO NOTHING
// of its own (autocommitted on another connection, before the transaction
// locks anything, so that it never waits inside the transaction); rows are
// kept, one per key ever locked.
//
// With NoWait a row held by another transaction fails at once with a
// *driver.ContendedError (it matches dlock.ErrNotAcquired; SQLSTATE 55P03);
// otherwise the call waits until the row is free or ctx ends, and then
// returns an error matching dlock.ErrNotAcquired and ctx's error. In both
// cases fn did not run and nothing was written. If fn returns an error or
// panics, the transaction is rolled back (the panic goes on) and fn's
// error is returned. A commit whose answer is lost (the connection died
// during COMMIT) has an unknown outcome: the error then matches no
// sentinel. Invalid arguments return an error matching driver.ErrInvalid
// before any I/O.
func WithRowLock(ctx context.Context, pool *pgxpool.Pool, key string, opts RowLockOptions, fn func(pgx.Tx) error) error {
	if pool == nil || fn == nil {
		return fmt.Errorf("%w: pgstore: nil pool or function", driver.ErrInvalid)
	}
	sel, ins, err := rowSQL(opts)
	if err != nil {
		return err
	}
	if err := checkRowKey(key); err != nil {
		return err
	}
	for created := false; ; created = true {
		tx, err := pool.BeginTx(ctx, pgx.TxOptions{})
		if err != nil {
			return rowErr(ctx, key, "begin", err)
		}
		found, err := lockRow(ctx, tx, sel, key)
		if err != nil || (!found && !created) {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			if err != nil {
				return rowErr(ctx, key, "lock", err)
			}
			if _, err := pool.Exec(ctx, ins, key); err != nil {
				return rowErr(ctx, key, "create row", err)
			}
			continue // a new transaction sees the row whatever its isolation
		}
		if !found {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return fmt.Errorf("pgstore: row lock %q: the row vanished after it was created", key)
		}
		return runInTx(ctx, tx, fn)
	}
}

func lockRow(ctx context.Context, tx pgx.Tx, sel, key string) (bool, error) {
	var one int
	err := tx.QueryRow(ctx, sel, key).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// runInTx runs fn in tx: commit on nil, rollback on an error or a panic.
func runInTx(ctx context.Context, tx pgx.Tx, fn func(pgx.Tx) error) (err error) {
	done := false
	defer func() {
		if !done {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := fn(tx); err != nil {
		done = true
		if rerr := tx.Rollback(context.WithoutCancel(ctx)); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
			return errors.Join(err, fmt.Errorf("pgstore: rollback: %w", rerr))
		}
		return err
	}
	done = true
	if err := tx.Commit(ctx); err != nil {
		return commitErr(err)
	}
	return nil
}

// rowErr classifies an error got while taking the row lock: NOWAIT's 55P03
// is a *driver.ContendedError, the end of ctx while waiting is
// ErrNotAcquired (fn did not run, nothing was written).
func rowErr(ctx context.Context, key, op string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "55P03" {
		return &driver.ContendedError{Remaining: -1}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: pgstore: row lock %q: %s: %w", driver.ErrNotAcquired, key, op, context.Cause(ctx))
	}
	return classify("row lock "+op, err)
}

// WithRowLockDB is WithRowLock for a *sql.DB on any PostgreSQL driver
// (pgx's stdlib, lib/pq): fn runs in a *sql.Tx. Everything else is as for
// WithRowLock.
func WithRowLockDB(ctx context.Context, db *sql.DB, key string, opts RowLockOptions, fn func(*sql.Tx) error) error {
	if db == nil || fn == nil {
		return fmt.Errorf("%w: pgstore: nil db or function", driver.ErrInvalid)
	}
	sel, ins, err := rowSQL(opts)
	if err != nil {
		return err
	}
	if err := checkRowKey(key); err != nil {
		return err
	}
	return sqlrow.Run(ctx, db, sqlrow.Dialect{
		Lock: func(ctx context.Context, tx *sql.Tx) (bool, error) {
			var one int
			err := tx.QueryRowContext(ctx, sel, key).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return false, nil
			}
			return err == nil, err
		},
		Create: func(ctx context.Context, c sqlrow.Starter) error {
			_, err := c.ExecContext(ctx, ins, key)
			return err
		},
		Err:      func(op string, err error) error { return rowErr(ctx, key, op, err) },
		Commit:   commitErr,
		Vanished: fmt.Errorf("pgstore: row lock %q: the row vanished after it was created", key),
	}, fn)
}

// commitErr is a failed COMMIT's error.
func commitErr(err error) error {
	return fmt.Errorf("pgstore: commit (outcome unknown if the connection died): %w", err)
}
