package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"example.com/dlock/cmd/dlock/internal/inventory"
)

// rowLockOpener opens the row locker (SELECT … FOR UPDATE NOWAIT) of the
// SQL database a store URL names, with a connection pool of its own that
// the returned close ends. Each SQL store contributes one (rowlock_*.go),
// so that the demo's code stays store-agnostic.
type rowLockOpener func(ctx context.Context, u *url.URL) (rl inventory.RowLocker, closeFn func() error, err error)

// rowLockers maps URL schemes to their row lock openers.
var rowLockers = map[string]rowLockOpener{}

// hasRowLocker reports whether the store URL's scheme has a row locker in
// this build.
func hasRowLocker(rawURL string) bool {
	return rowLockers[strings.ToLower(schemeOf(rawURL))] != nil
}

// openRowLocker opens the row locker of rawURL's database: nil and a no-op
// close when rawURL is empty or its scheme has none. A URL that does not
// parse is an exitError with ExitUsage, a database that cannot be reached
// one with ExitUnavailable; neither message holds a password.
func openRowLocker(ctx context.Context, rawURL string) (inventory.RowLocker, func(), error) {
	nop := func() {}
	if rawURL == "" || !hasRowLocker(rawURL) {
		return nil, nop, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nop, exitWith(ExitUsage, fmt.Errorf("store URL: %w", redact(rawURL, err)))
	}
	rl, closeFn, err := rowLockers[strings.ToLower(u.Scheme)](ctx, u)
	if err != nil {
		return nil, nop, exitFor(redact(rawURL, err))
	}
	return rl, func() { _ = closeFn() }, nil
}
