package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"cirello.io/pglock"
)

// Settings of the pglock peer. Its defaults are a 20 s lease and a 5 s
// heartbeat, and a waiter sleeps a whole lease between tries, so with the
// defaults a contended waiter waits 20 s; the benchmark gives it a 2 s
// lease, ten times shorter waits than its defaults, in its favour, and no
// heartbeat ("pglock"): pglock starts a heartbeat at once on every acquire
// (nextval + UPDATE), which a release a moment later cancels in flight, so
// each cycle reopens a connection (the cancel), and when the cancelled
// UPDATE was applied the release finds another version, fails, and leaves
// the row until a waiter steals it a lease later. "pglock-hb" (lease 2 s,
// heartbeat 500 ms: pglock requires lease >= 2 x heartbeat) is that
// configuration, run only when named in -libs.
const (
	pglockLease     = 2 * time.Second
	pglockHeartbeat = 500 * time.Millisecond
	pglockTable     = "pglock_locks"
)

// locker is one library in one process (one client, shared by the
// process's goroutines).
type locker interface {
	lock(ctx context.Context, key string) (func(context.Context) error, error)
	close()
}

// libsOf are the libraries compared on each database, dlock first;
// optional ones run only when -libs names them.
var libsOf = map[string][]string{
	dbPG:    {"dlock", "pglock", "poll"},
	dbMySQL: {"dlock", "poll"},
}

// "none" takes no lock at all: the negative control of the overlap and
// oversell checks (the tests run it and expect both to fail).
// "store" is dlock's lease store without the Client (uncontended only);
// "-sqldb": pgstore.NewDB on database/sql instead of a pgx pool;
// "dlock-session": mysqlstore's session lock (GET_LOCK); "dlock-notransfer":
// the lease table with its driver.Transferer hidden from the Client.
var optionalLibs = map[string][]string{
	dbPG:    {"pglock-hb", "store", "dlock-sqldb", "store-sqldb", "none"},
	dbMySQL: {"store", "dlock-session", "dlock-notransfer", "none"},
}

// conf is what a process needs to open a library.
type conf struct {
	DB         string `json:"db"`
	URL        string `json:"url"`
	Goroutines int    `json:"goroutines"`
}

// newLocker opens lib on c's database, its round trips counted by ctr, and
// warms its pool.
func newLocker(ctx context.Context, lib string, c conf, ctr *counter) (locker, error) {
	switch lib {
	case "dlock", "store", "dlock-sqldb", "store-sqldb", "dlock-session":
		return newDlock(ctx, c, ctr, strings.HasPrefix(lib, "store"), strings.HasSuffix(lib, "-sqldb"), lib == "dlock-session")
	case "dlock-notransfer":
		if c.DB == dbMySQL {
			return newMySQLLease(ctx, c, ctr, false, true)
		}
	case "none":
		return noLock{}, nil
	}
	db, err := openSQL(c.DB, c.URL, ctr, poolSize(c.Goroutines))
	if err != nil {
		return nil, err
	}
	if err := warm(ctx, db, min(c.Goroutines+1, poolSize(c.Goroutines))); err != nil {
		db.Close()
		return nil, err
	}
	switch {
	case lib == "poll":
		return &pollLib{db: db, r: newPollRegistry(db, c.DB)}, nil
	case (lib == "pglock" || lib == "pglock-hb") && c.DB == dbPG:
		hb := time.Duration(0)
		if lib == "pglock-hb" {
			hb = pglockHeartbeat
		}
		cl, err := pglock.UnsafeNew(db, pglock.WithCustomTable(pglockTable),
			pglock.WithLeaseDuration(pglockLease), pglock.WithHeartbeatFrequency(hb))
		if err != nil {
			db.Close()
			return nil, err
		}
		return &pglockLib{db: db, c: cl}, nil
	}
	db.Close()
	return nil, fmt.Errorf("no library %q on %s (known: %v)", lib, c.DB, libsOf[c.DB])
}

type pollLib struct {
	db *sql.DB
	r  *pollRegistry
}

func (p *pollLib) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	return p.r.lock(ctx, key)
}

func (p *pollLib) close() { p.db.Close() }

// pglockLib is one pglock.Client per process on a database/sql pool of
// pgx's stdlib driver (pglock.UnsafeNew: pglock.New accepts only lib/pq;
// pgx is dlock's driver too, so both pay the same driver costs).
type pglockLib struct {
	db *sql.DB
	c  *pglock.Client
}

func (p *pglockLib) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := p.c.AcquireContext(ctx, key)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		err := p.c.ReleaseContext(ctx, l)
		if errors.Is(err, pglock.ErrLockAlreadyReleased) {
			return fmt.Errorf("pglock: lock lost before release: %w", err)
		}
		return err
	}, nil
}

func (p *pglockLib) close() { p.db.Close() }

// setup creates the peers' tables and the seed's stock table on the
// database (idempotent), through a pool of its own.
func setup(ctx context.Context, c conf) error {
	db, err := openSQL(c.DB, c.URL, &counter{}, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	stmts := []string{pollSchema(c.DB), `CREATE TABLE IF NOT EXISTS bench_stock (id INT PRIMARY KEY, n INT NOT NULL)`}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	if c.DB == dbPG {
		cl, err := pglock.UnsafeNew(db, pglock.WithCustomTable(pglockTable))
		if err != nil {
			return err
		}
		if err := cl.TryCreateTable(); err != nil {
			return err
		}
	}
	return setupDlock(ctx, c)
}

// noLock is the negative control: lock returns at once.
type noLock struct{}

func (noLock) lock(context.Context, string) (func(context.Context) error, error) {
	return func(context.Context) error { return nil }, nil
}

func (noLock) close() {}
