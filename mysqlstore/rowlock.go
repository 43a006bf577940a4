package mysqlstore

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"math"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/sqlrow"
)

// RowLockOptions configure WithRowLock.
type RowLockOptions struct {
	// Table is the schema prefix, as Options.Table (empty: "dlock").
	Table string
	// NoWait fails at once with a *driver.ContendedError when another
	// transaction holds the row (SELECT ... FOR UPDATE NOWAIT). Otherwise
	// the wait is bounded by ctx's deadline (FOR UPDATE WAIT n, whole
	// seconds rounded up) or, without one, by the server's
	// innodb_lock_wait_timeout (50 s by default).
	NoWait bool
	// IdleTimeout, if positive, bounds how long the transaction may sit
	// idle (between statements: in fn, or in a stopped or stalled process)
	// before the server kills its connection, which rolls the transaction
	// back and frees the row: MariaDB's idle_transaction_timeout (10.3+),
	// in whole seconds rounded up, set on the transaction's connection
	// before BEGIN and reset to the server's default after the transaction
	// (two more round trips; a connection whose reset fails is discarded,
	// never returned to the pool with the timeout). Without it a stalled
	// holder keeps the row until its connection dies; with it the stalled
	// holder's transaction can no longer commit and the next locker gets
	// the row. Negative is driver.ErrInvalid. MySQL 8 has no such variable:
	// the SET fails and WithRowLock returns that error, fn not run.
	IdleTimeout time.Duration
}

// WithRowLock runs fn inside a READ COMMITTED transaction that holds key's
// row in <Table>_rows with SELECT ... FOR UPDATE (the Quartz pattern): the
// lock and fn's writes commit together, or roll back together, so a holder
// that lost its lock (its connection died, its transaction was rolled back)
// cannot have written anything. The row is created on first use (an INSERT
// IGNORE in its own statement, so that creating it takes no lock that the
// FOR UPDATE would have to upgrade).
//
// When another transaction holds the row and NoWait is set, or the wait
// ends (lock wait timeout), it returns an error matching
// driver.ErrNotAcquired (a *driver.ContendedError with a negative
// Remaining) and fn does not run. When ctx ends before the row is locked
// (its deadline, which usually comes before the server's WAIT n, rounded
// up to whole seconds, or its cancellation) it returns an error matching
// driver.ErrNotAcquired and ctx's error (context.DeadlineExceeded or
// context.Canceled); fn does not run and nothing was written. If fn returns an error the transaction
// is rolled back and that error returned; otherwise it is committed and a
// commit error is returned (the writes may or may not have been applied
// when the connection broke during COMMIT). fn must not commit or roll
// back tx. A bad key returns driver.ErrInvalid; a missing schema
// driver.ErrRefused. Needs MariaDB 10.3+ (NOWAIT, WAIT n); on MySQL 8 only
// NoWait or a wait without a deadline work (untested).
func WithRowLock(ctx context.Context, db *sql.DB, key string, opts RowLockOptions, fn func(*sql.Tx) error) error {
	n, err := tableNames(opts.Table)
	if err != nil {
		return err
	}
	if db == nil || fn == nil {
		return fmt.Errorf("%w: mysqlstore: nil *sql.DB or fn", driver.ErrInvalid)
	}
	if key == "" || len(key) > MaxKeyBytes {
		return fmt.Errorf("%w: mysqlstore: key of %d bytes (1 to %d)", driver.ErrInvalid, len(key), MaxKeyBytes)
	}
	if opts.IdleTimeout < 0 {
		return fmt.Errorf("%w: mysqlstore: negative IdleTimeout", driver.ErrInvalid)
	}
	if opts.IdleTimeout > 0 {
		return withIdleTimeout(ctx, db, n.rows, key, opts, fn)
	}
	return runLocked(ctx, db, n.rows, key, opts.NoWait, fn)
}

// runLocked begins a READ COMMITTED transaction on c, locks key's row in
// it, runs fn and commits (or rolls back): sqlrow.Run, the missing row
// created by an autocommit INSERT IGNORE.
func runLocked(ctx context.Context, c sqlrow.Starter, table, key string, noWait bool, fn func(*sql.Tx) error) error {
	return sqlrow.Run(ctx, c, sqlrow.Dialect{
		Tx: &sql.TxOptions{Isolation: sql.LevelReadCommitted},
		Lock: func(ctx context.Context, tx *sql.Tx) (bool, error) {
			return lockRow(ctx, tx, table, key, noWait)
		},
		Create: func(ctx context.Context, c sqlrow.Starter) error {
			_, err := c.ExecContext(ctx, "INSERT IGNORE INTO "+table+" (name) VALUES (?)", []byte(key))
			return err
		},
		Err:      func(op string, err error) error { return rowErr(ctx, key, op, err) },
		Commit:   func(err error) error { return wrap("row lock: commit", err) },
		Vanished: fmt.Errorf("mysqlstore: row lock %q: row vanished after creation (deleted by someone else?)", key),
	}, fn)
}

// withIdleTimeout is WithRowLock with opts.IdleTimeout: the transaction
// runs on a connection of its own whose idle_transaction_timeout is set
// first and reset afterwards.
func withIdleTimeout(ctx context.Context, db *sql.DB, table, key string, opts RowLockOptions, fn func(*sql.Tx) error) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return rowErr(ctx, key, "connection", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, rerr := conn.ExecContext(rctx, "SET SESSION idle_transaction_timeout = DEFAULT"); rerr != nil {
			// Never back to the pool with the timeout (or dead).
			_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
		}
		_ = conn.Close()
	}()
	secs := int64(math.Ceil(opts.IdleTimeout.Seconds()))
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION idle_transaction_timeout = %d", secs)); err != nil {
		return rowErr(ctx, key, "idle timeout", err)
	}
	return runLocked(ctx, conn, table, key, opts.NoWait, fn)
}

// rowErr classifies an error got before fn ran, as pgstore's row lock
// does: once ctx has ended (its deadline, usually before the server's
// WAIT n, which is rounded up to whole seconds; or its cancellation), an
// error matching driver.ErrNotAcquired and ctx's error (fn did not run,
// nothing was written), keeping a *driver.ContendedError when the server's
// lock wait timeout answered as the deadline passed; otherwise a
// *driver.ContendedError (NOWAIT, lock wait timeout) as it is, and others
// as wrap.
func rowErr(ctx context.Context, key, op string, err error) error {
	cerr := ended(ctx)
	switch {
	case cerr != nil && errors.Is(err, driver.ErrNotAcquired):
		return fmt.Errorf("%w (the wait ended with ctx: %w)", err, cerr)
	case cerr != nil:
		return fmt.Errorf("%w: mysqlstore: row lock %q: %s: %w", driver.ErrNotAcquired, key, op, cerr)
	case errors.Is(err, driver.ErrNotAcquired):
		return err
	}
	return wrap("row lock: "+op, err)
}

// ended returns ctx's error (with its cause, if that is another error),
// or context.DeadlineExceeded once ctx's deadline has passed although its
// timer has not fired yet; nil while ctx lives.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		if c := context.Cause(ctx); c != nil && c != err {
			return fmt.Errorf("%w: %w", err, c)
		}
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// lockRow takes key's row in tx: false if it has none, a
// *driver.ContendedError for NOWAIT or a lock wait timeout, else the
// driver's error as it is (the caller classifies it with rowErr).
func lockRow(ctx context.Context, tx *sql.Tx, table, key string, noWait bool) (bool, error) {
	q := "SELECT 1 FROM " + table + " WHERE name = ? FOR UPDATE" + waitClause(ctx, noWait)
	var one int
	err := tx.QueryRowContext(ctx, q, []byte(key)).Scan(&one)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case errNumber(err) == erLockWait || errNumber(err) == erNoWait:
		return false, fmt.Errorf("mysqlstore: row lock %q: %w", key, &driver.ContendedError{Remaining: -1})
	default:
		return false, err
	}
}

// waitClause is NOWAIT, WAIT n for ctx's deadline, or nothing.
func waitClause(ctx context.Context, noWait bool) string {
	if noWait {
		return " NOWAIT"
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return ""
	}
	secs := math.Ceil(time.Until(dl).Seconds())
	if secs < 1 {
		secs = 1
	}
	return fmt.Sprintf(" WAIT %d", int64(secs))
}
