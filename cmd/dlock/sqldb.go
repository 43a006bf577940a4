package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"example.com/dlock/cmd/dlock/internal/inventory"
	"example.com/dlock/driver"
)

// sqlDB is what the CLI needs of an SQL database besides its lock store:
// the row lock of the demo's sql-for-update strategy, and the schema for
// `dlock schema` when the opened store does not offer driver.Schemer
// itself. Each SQL store contributes an opener (sqldb_*.go) that makes a
// pool of its own from the store URL, so that the demo's and the schema
// command's code stay store-agnostic.
type sqlDB struct {
	desc    string // for messages, without secrets
	rowLock func(ctx context.Context, key string, fn func(context.Context) error) error
	schema  func() string                   // the DDL; no I/O
	migrate func(ctx context.Context) error // idempotent
	close   func() error                    // closes the pool the opener made
}

// sqlDBOpener opens the sqlDB of a store URL. It makes no network call (the
// pool dials on first use); a malformed URL returns driver.ErrInvalid.
type sqlDBOpener func(ctx context.Context, u *url.URL) (*sqlDB, error)

// sqlDBOpeners maps URL schemes to their openers.
var sqlDBOpeners = map[string]sqlDBOpener{}

// WithRowLock implements inventory.RowLocker with NOWAIT: a row locked by
// another transaction returns an error matching driver.ErrNotAcquired.
func (d *sqlDB) WithRowLock(ctx context.Context, key string, fn func(context.Context) error) error {
	return d.rowLock(ctx, key, fn)
}

// Schema and Migrate implement driver.Schemer.
func (d *sqlDB) Schema() string { return d.schema() }

// Migrate implements driver.Schemer.
func (d *sqlDB) Migrate(ctx context.Context) error { return d.migrate(ctx) }

var (
	_ inventory.RowLocker = (*sqlDB)(nil)
	_ driver.Schemer      = (*sqlDB)(nil)
)

// hasRowLocker reports whether the store URL's scheme has an sqlDB (and so
// a row lock) in this build.
func hasRowLocker(rawURL string) bool {
	return sqlDBOpeners[strings.ToLower(schemeOf(rawURL))] != nil
}

// openSQLDB opens the sqlDB of rawURL: nil when rawURL is empty or its
// scheme has none. A URL that does not parse is an exitError with
// ExitUsage; neither it nor any other error holds a password.
func openSQLDB(ctx context.Context, rawURL string) (*sqlDB, error) {
	if rawURL == "" || !hasRowLocker(rawURL) {
		return nil, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, exitWith(ExitUsage, fmt.Errorf("store URL: %w", redact(rawURL, err)))
	}
	d, err := sqlDBOpeners[strings.ToLower(u.Scheme)](ctx, u)
	if err != nil {
		return nil, exitFor(redact(rawURL, err))
	}
	return d, nil
}

// rowLockWarm is how many row lock connections an inventory instance
// opens before it serves, and how long it tries. Half the pool: taking a
// row lock whose row is missing holds one connection (the transaction)
// while it creates the row on another (mysqlstore), so n first uses at
// once need up to 2n connections.
const (
	rowLockWarm        = sqlRowLockConns / 2
	rowLockWarmTimeout = 10 * time.Second
)

// openRowLocker opens the row locker of rawURL's database, with the row
// of inventory.LockKey created and rowLockWarm connections opened: nil and a no-op close when rawURL names
// none (see openSQLDB). A database that cannot be reached within
// rowLockWarmTimeout is an exitError with ExitUnavailable.
func openRowLocker(ctx context.Context, rawURL string) (inventory.RowLocker, func(), error) {
	d, err := openSQLDB(ctx, rawURL)
	if err != nil || d == nil {
		return nil, func() {}, err
	}
	wctx, cancel := context.WithTimeout(ctx, rowLockWarmTimeout)
	defer cancel()
	// The demo's row first, alone: the burst of requests then finds it.
	err = d.rowLock(wctx, inventory.LockKey, func(context.Context) error { return nil })
	if err == nil {
		err = d.warm(wctx, rowLockWarm)
	}
	if err != nil {
		_ = d.close()
		return nil, func() {}, exitWith(ExitUnavailable, fmt.Errorf("row lock connections to %s failed: %w", d.desc, plain(redact(rawURL, err))))
	}
	return d, func() { _ = d.close() }, nil
}

// warm takes n row locks at once, on the keys dlock-inventory-warm-0 to
// n-1 (rows kept in the rows table), each held until all n are held, so
// that n of the pool's connections are open and have run the row lock's
// statements once: a PostgreSQL backend's first statements on a table
// (catalog lookups, pgx's prepare) cost tens of milliseconds on a loaded
// machine, which would show as slow refusals in the demo's first run. It
// returns the first error, or ctx's when the pool cannot hold n at once.
func (d *sqlDB) warm(ctx context.Context, n int) error {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		first   error
		inside  int
		allIn   = make(chan struct{})
		errOnce sync.Once
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := d.rowLock(ctx, fmt.Sprintf("dlock-inventory-warm-%d", i), func(ctx context.Context) error {
				mu.Lock()
				if inside++; inside == n {
					close(allIn)
				}
				mu.Unlock()
				select {
				case <-allIn:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			if err != nil {
				errOnce.Do(func() { first = err })
			}
		}()
	}
	wg.Wait()
	return first
}

// checkTable returns the store's error (matching driver.ErrInvalid) for a
// table prefix it does not accept. It asks migrate with a cancelled
// context: both SQL stores check the prefix before any I/O, and a valid
// one then fails on the context without dialling. (Schema alone cannot
// tell: it prints the default prefix's DDL for an invalid one.)
func (d *sqlDB) checkTable() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.migrate(ctx); errors.Is(err, driver.ErrInvalid) {
		return err
	}
	return nil
}
