package pgstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"

	"example.com/dlock/driver"
)

var (
	_ driver.RowLocker = (*Store)(nil)
	_ driver.RowLocker = (*SessionStore)(nil)
)

// WithRowLock implements driver.RowLocker: the package's WithRowLock (or
// WithRowLockDB, on a Store made by NewDB) on the store's pool, in the
// <Table>_rows of the store's table prefix; fn runs with ctx. See the
// package's WithRowLock for the errors.
func (s *Store) WithRowLock(ctx context.Context, key string, opts driver.RowLockOptions, fn func(context.Context) error) error {
	if fn == nil {
		return fmt.Errorf("%w: pgstore: nil function", driver.ErrInvalid)
	}
	ro := RowLockOptions{Table: s.names.prefix(), NoWait: opts.NoWait}
	switch b := s.db.(type) {
	case pgxBackend:
		return WithRowLock(ctx, b.pool, key, ro, func(pgx.Tx) error { return fn(ctx) })
	case sqlBackend:
		return WithRowLockDB(ctx, b.db, key, ro, func(*sql.Tx) error { return fn(ctx) })
	}
	return fmt.Errorf("%w: pgstore: row lock on a store of an unknown pool", driver.ErrInvalid)
}

// WithRowLock implements driver.RowLocker: the package's WithRowLock on the
// session store's pool (on connections it does not pin), in the
// <Table>_rows of its table prefix; fn runs with ctx.
func (s *SessionStore) WithRowLock(ctx context.Context, key string, opts driver.RowLockOptions, fn func(context.Context) error) error {
	if fn == nil {
		return fmt.Errorf("%w: pgstore: nil function", driver.ErrInvalid)
	}
	ro := RowLockOptions{Table: s.table, NoWait: opts.NoWait}
	return WithRowLock(ctx, s.pool, key, ro, func(pgx.Tx) error { return fn(ctx) })
}
