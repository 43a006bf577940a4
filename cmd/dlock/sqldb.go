package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

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

// openRowLocker opens the row locker of rawURL's database: nil and a no-op
// close when rawURL names none (see openSQLDB).
func openRowLocker(ctx context.Context, rawURL string) (inventory.RowLocker, func(), error) {
	d, err := openSQLDB(ctx, rawURL)
	if err != nil || d == nil {
		return nil, func() {}, err
	}
	return d, func() { _ = d.close() }, nil
}

// storeParams takes the store's own query parameters out of u: it returns
// the value of table (at most once: more is driver.ErrInvalid) and u
// without the parameters named in own, for the database driver.
func storeParams(u *url.URL, own ...string) (table string, rest *url.URL, err error) {
	q := u.Query()
	if v := q["table"]; len(v) > 1 {
		return "", nil, fmt.Errorf("%w: store URL: give table at most once", driver.ErrInvalid)
	} else if len(v) == 1 {
		table = v[0]
	}
	for _, p := range own {
		q.Del(p)
	}
	c := *u
	c.RawQuery = q.Encode()
	return table, &c, nil
}
