package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync/atomic"
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

// newDlock opens dlock, or with storeOnly its store alone ("store"); with
// viaSQL, on PostgreSQL, pgstore.NewDB on a database/sql pool of pgx's
// stdlib driver (the pool type pglock and the polling table use) instead
// of a pgx pool ("dlock-sqldb", "store-sqldb"); with session, on MariaDB,
// mysqlstore's session lock (GET_LOCK on pinned connections, waiters
// blocked in GET_LOCK: driver.Queuer) with its default options
// ("dlock-session").
func newDlock(ctx context.Context, c conf, ctr *counter, storeOnly, viaSQL, session bool) (locker, error) {
	switch {
	case c.DB == dbPG && viaSQL:
		db, err := openPgSQL(c.URL, ctr, poolSize(c.Goroutines))
		if err != nil {
			return nil, err
		}
		if err := warm(ctx, db, poolSize(c.Goroutines)); err != nil {
			db.Close()
			return nil, err
		}
		st, err := pgstore.NewDB(db, pgstore.Options{Table: tableOf(storeOnly)})
		if err != nil {
			db.Close()
			return nil, err
		}
		return newDlockClient(st, storeOnly, func(ctx context.Context) { _ = st.Close(ctx); db.Close() })
	case c.DB == dbPG:
		pool, err := openPgxPool(ctx, c.URL, ctr, poolSize(c.Goroutines))
		if err != nil {
			return nil, err
		}
		st, err := pgstore.New(pool, pgstore.Options{Table: tableOf(storeOnly)})
		if err != nil {
			pool.Close()
			return nil, err
		}
		return newDlockClient(st, storeOnly, func(ctx context.Context) { _ = st.Close(ctx); pool.Close() })
	case c.DB == dbMySQL && session:
		db, err := openWarmMySQL(ctx, c, ctr)
		if err != nil {
			return nil, err
		}
		st, err := mysqlstore.NewSession(db, mysqlstore.SessionOptions{})
		if err != nil {
			db.Close()
			return nil, err
		}
		return newDlockClient(st, false, func(context.Context) { _ = st.Close(); db.Close() })
	case c.DB == dbMySQL:
		return newMySQLLease(ctx, c, ctr, storeOnly, false)
	}
	return nil, fmt.Errorf("unknown database %q", c.DB)
}

// newMySQLLease opens dlock (or with storeOnly the store alone) on
// mysqlstore's lease table; with plain the Client sees only its
// driver.Mutex methods ("dlock-notransfer": no driver.Transferer, so a
// local hand-over is a release and an acquire, as before mysqlstore had
// Transfer), for an A/B in one run.
func newMySQLLease(ctx context.Context, c conf, ctr *counter, storeOnly, plain bool) (locker, error) {
	db, err := openWarmMySQL(ctx, c, ctr)
	if err != nil {
		return nil, err
	}
	st, err := mysqlstore.New(db, mysqlstore.Options{Table: tableOf(storeOnly)})
	if err != nil {
		db.Close()
		return nil, err
	}
	var m driver.Mutex = st
	if plain {
		m = plainMutex{st}
	}
	return newDlockClient(m, storeOnly, func(context.Context) { db.Close() })
}

// openWarmMySQL opens the MariaDB pool of c, with its connections opened
// before the clock starts (see warm).
func openWarmMySQL(ctx context.Context, c conf, ctr *counter) (*sql.DB, error) {
	db, err := openMySQL(c.URL, ctr, poolSize(c.Goroutines))
	if err != nil {
		return nil, err
	}
	if err := warm(ctx, db, min(c.Goroutines+1, poolSize(c.Goroutines))); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// plainMutex hides every capability of the store it wraps (it has no
// Unwrap, so driver.As finds nothing behind it).
type plainMutex struct{ m driver.Mutex }

func (p plainMutex) Model() driver.Model { return p.m.Model() }
func (p plainMutex) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	return p.m.Acquire(ctx, key, token, ttl)
}
func (p plainMutex) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	return p.m.Extend(ctx, key, token, ttl)
}
func (p plainMutex) Release(ctx context.Context, key, token string) error {
	return p.m.Release(ctx, key, token)
}

func newDlockClient(st driver.Mutex, storeOnly bool, closeStore func(context.Context)) (locker, error) {
	if storeOnly {
		return &storeLib{st: st, closeStore: closeStore}, nil
	}
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

// tableOf is the store's table prefix: "dlock" (the default) for the
// Client, "dlockstore" for the store alone, so that the releases of one do
// not wake the other's listener (pgstore's NOTIFY channel follows the
// prefix) when both are open in one process.
func tableOf(storeOnly bool) string {
	if storeOnly {
		return "dlockstore"
	}
	return "dlock"
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
		for _, t := range []string{tableOf(false), tableOf(true)} {
			if err := pgstore.Migrate(ctx, pool, pgstore.Options{Table: t}); err != nil {
				return err
			}
		}
		return nil
	case dbMySQL:
		db, err := openMySQL(c.URL, &counter{}, 2)
		if err != nil {
			return err
		}
		defer db.Close()
		for _, t := range []string{tableOf(false), tableOf(true)} {
			if err := mysqlstore.Migrate(ctx, db, mysqlstore.Options{Table: t}); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

// lockTables are the lock tables of every library: runScenario empties
// them before each run, so that a lock left by a wait the previous run's
// end cut short (an acquire the server applied after the caller gave up)
// does not delay the next run.
var lockTables = map[string][]string{
	dbPG:    {"dlock_locks", "dlockstore_locks", pglockTable, pollTable},
	dbMySQL: {"dlock_locks", "dlockstore_locks", pollTable},
}

func clearLocks(ctx context.Context, db *sql.DB, kind string) error {
	for _, t := range lockTables[kind] {
		if _, err := db.ExecContext(ctx, `DELETE FROM `+t); err != nil {
			return fmt.Errorf("clear %s: %w", t, err)
		}
	}
	return nil
}

// storeLib calls the lease store directly (driver.Mutex: Acquire and
// Release with a token, no Client): the optional library "store", a
// diagnostic that separates the store's statements from the Client's
// work. It does not wait: a contended Acquire is an error, so it is for
// the uncontended scenario only.
type storeLib struct {
	st         driver.Mutex
	closeStore func(context.Context)
	n          atomic.Int64
}

func (s *storeLib) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	token := fmt.Sprintf("bench-store-token-%d-%d", os.Getpid(), s.n.Add(1))
	if _, err := s.st.Acquire(ctx, key, token, 30*time.Second); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return s.st.Release(ctx, key, token) }, nil
}

func (s *storeLib) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.closeStore(ctx)
}
