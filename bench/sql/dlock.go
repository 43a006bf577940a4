package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dlockLib is one dlock Client on one lease store per process, shared by
// its goroutines, default options (Lock, Lease.Release): on PostgreSQL
// pgstore on a pgx pool (waiters woken by NOTIFY on one listening
// connection), on MariaDB mysqlstore on a go-sql-driver pool.
type dlockLib struct {
	dc         *dlock.Client
	closeStore func(context.Context)
}

func newDlock(ctx context.Context, c conf, ctr *counter) (locker, error) {
	switch c.DB {
	case dbPG:
		pool, err := openPgxPool(ctx, c.URL, ctr, poolSize(c.Goroutines))
		if err != nil {
			return nil, err
		}
		st, err := pgstore.New(pool, pgstore.Options{})
		if err != nil {
			pool.Close()
			return nil, err
		}
		return newDlockClient(st, func(ctx context.Context) { _ = st.Close(ctx); pool.Close() })
	case dbMySQL:
		db, err := openMySQL(c.URL, ctr, poolSize(c.Goroutines))
		if err != nil {
			return nil, err
		}
		if err := warm(ctx, db, min(c.Goroutines+1, poolSize(c.Goroutines))); err != nil {
			db.Close()
			return nil, err
		}
		st, err := mysqlstore.New(db, mysqlstore.Options{})
		if err != nil {
			db.Close()
			return nil, err
		}
		return newDlockClient(st, func(context.Context) { db.Close() })
	}
	return nil, fmt.Errorf("unknown database %q", c.DB)
}

func newDlockClient(st driver.Mutex, closeStore func(context.Context)) (locker, error) {
	dc, err := dlock.New(st)
	if err != nil {
		closeStore(context.Background())
		return nil, err
	}
	return &dlockLib{dc: dc, closeStore: closeStore}, nil
}

func (d *dlockLib) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := d.dc.Lock(ctx, key)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (d *dlockLib) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.dc.Close(ctx)
	d.closeStore(ctx)
}

// setupDlock creates dlock's schema (idempotent).
func setupDlock(ctx context.Context, c conf) error {
	switch c.DB {
	case dbPG:
		pool, err := pgxpool.New(ctx, c.URL)
		if err != nil {
			return err
		}
		defer pool.Close()
		return pgstore.Migrate(ctx, pool, pgstore.Options{})
	case dbMySQL:
		db, err := openMySQL(c.URL, &counter{}, 2)
		if err != nil {
			return err
		}
		defer db.Close()
		return mysqlstore.Migrate(ctx, db, mysqlstore.Options{})
	}
	return nil
}

// lockTables are the lock tables of every library: runScenario empties
// them before each run, so that a lock left by a wait the previous run's
// end cut short (an acquire the server applied after the caller gave up)
// does not delay the next run.
var lockTables = map[string][]string{
	dbPG:    {"dlock_locks", pglockTable, pollTable},
	dbMySQL: {"dlock_locks", pollTable},
}

func clearLocks(ctx context.Context, db *sql.DB, kind string) error {
	for _, t := range lockTables[kind] {
		if _, err := db.ExecContext(ctx, `DELETE FROM `+t); err != nil {
			return fmt.Errorf("clear %s: %w", t, err)
		}
	}
	return nil
}
