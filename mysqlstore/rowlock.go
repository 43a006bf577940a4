package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"example.com/dlock/driver"
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
// Remaining) and fn does not run. If fn returns an error the transaction
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
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return wrap("row lock: begin", err)
	}
	if err := lockRow(ctx, db, tx, n.rows, key, opts.NoWait); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return wrap("row lock: commit", err)
	}
	return nil
}

// lockRow takes key's row in tx, creating it (outside tx) if missing.
func lockRow(ctx context.Context, db *sql.DB, tx *sql.Tx, table, key string, noWait bool) error {
	q := "SELECT 1 FROM " + table + " WHERE name = ? FOR UPDATE" + waitClause(ctx, noWait)
	for try := 0; try < 2; try++ {
		var one int
		err := tx.QueryRowContext(ctx, q, []byte(key)).Scan(&one)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, sql.ErrNoRows) && try == 0:
			// Under READ COMMITTED the next SELECT sees the row once
			// this autocommit INSERT (or a concurrent one) committed.
			if _, err := db.ExecContext(ctx, "INSERT IGNORE INTO "+table+" (name) VALUES (?)", []byte(key)); err != nil {
				return wrap("row lock: create row", err)
			}
		case errNumber(err) == erLockWait || errNumber(err) == erNoWait:
			return fmt.Errorf("mysqlstore: row lock %q: %w", key, &driver.ContendedError{Remaining: -1})
		default:
			return wrap("row lock", err)
		}
	}
	return fmt.Errorf("mysqlstore: row lock %q: row vanished after creation (deleted by someone else?)", key)
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
