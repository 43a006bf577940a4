package mysqlstore

import (
	"context"
	"database/sql"

	"example.com/dlock/driver"
)

var (
	_ driver.RowLocker = (*Store)(nil)
	_ driver.RowLocker = (*SessionStore)(nil)
)

// WithRowLock implements driver.RowLocker: the package's WithRowLock on the
// store's *sql.DB, in the <Table>_rows of its table prefix; fn runs with
// ctx. See the package's WithRowLock for the errors.
func (s *Store) WithRowLock(ctx context.Context, key string, opts driver.RowLockOptions, fn func(context.Context) error) error {
	return rowLock(ctx, s.db, s.opts.Table, key, opts, fn)
}

// WithRowLock implements driver.RowLocker: the package's WithRowLock on the
// session store's *sql.DB (on connections it does not pin), in the
// <Table>_rows of its table prefix; fn runs with ctx.
func (s *SessionStore) WithRowLock(ctx context.Context, key string, opts driver.RowLockOptions, fn func(context.Context) error) error {
	return rowLock(ctx, s.db, s.opts.Table, key, opts, fn)
}

func rowLock(ctx context.Context, db *sql.DB, table, key string, opts driver.RowLockOptions, fn func(context.Context) error) error {
	var txFn func(*sql.Tx) error // nil stays nil: WithRowLock refuses it
	if fn != nil {
		txFn = func(*sql.Tx) error { return fn(ctx) }
	}
	return WithRowLock(ctx, db, key, RowLockOptions{Table: table, NoWait: opts.NoWait}, txFn)
}
