package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"example.com/dlock/cmd/dlock/internal/inventory"
	"example.com/dlock/driver"
)

// sqlRowLockConns is the connection pool the CLI asks of a store it opens
// for the demo's sql-for-update strategy (driver.OpenHints.Conns; a URL
// that sets the pool's size wins): each sql-for-update request holds a
// connection for its transaction, and too small a pool turns NOWAIT's
// refusals into waits for a connection.
const sqlRowLockConns = 32

// rowLockWarm is how many row lock connections an inventory instance
// opens before it serves, and how long it tries. Half the pool: taking a
// row lock whose row is missing holds one connection (the transaction)
// while it creates the row on another, so n first uses at once need up to
// 2n connections.
const (
	rowLockWarm        = sqlRowLockConns / 2
	rowLockWarmTimeout = 10 * time.Second
)

// rowLock is a store's driver.RowLocker as the demo's inventory.RowLocker:
// NOWAIT, a row locked by another transaction an error matching
// driver.ErrNotAcquired.
type rowLock struct{ rl driver.RowLocker }

func (r rowLock) WithRowLock(ctx context.Context, key string, fn func(context.Context) error) error {
	return r.rl.WithRowLock(ctx, key, driver.RowLockOptions{NoWait: true}, fn)
}

// hasRowLocker reports whether the store rawURL names offers a row lock
// (driver.RowLocker), asking only SQL stores (inventory.IsSQLScheme), which
// it opens without I/O (driver.OpenHints.NoIO) and closes. A URL that does
// not open is taken as offering one: opening it for the demo reports why.
func hasRowLocker(rawURL string) bool {
	if !inventory.IsSQLScheme(schemeOf(rawURL)) {
		return false
	}
	o, err := driver.Open(driver.WithOpenHints(context.Background(), driver.OpenHints{NoIO: true}), rawURL)
	if err != nil {
		return true
	}
	defer o.Close()
	_, ok := driver.As[driver.RowLocker](o.Store)
	return ok
}

// rowLockerOf returns the row lock of the lock store st (opened from
// rawURL) as the demo uses it, with the row of inventory.LockKey created
// and rowLockWarm connections opened: nil when st is nil or has no
// driver.RowLocker. A database that cannot be reached within
// rowLockWarmTimeout is an exitError with ExitUnavailable, without
// rawURL's password.
func rowLockerOf(ctx context.Context, st *openedStore, rawURL string) (inventory.RowLocker, error) {
	if st == nil {
		return nil, nil
	}
	rl, ok := driver.As[driver.RowLocker](st.Store)
	if !ok {
		return nil, nil
	}
	r := rowLock{rl}
	wctx, cancel := context.WithTimeout(ctx, rowLockWarmTimeout)
	defer cancel()
	// The demo's row first, alone: the burst of requests then finds it.
	err := r.WithRowLock(wctx, inventory.LockKey, func(context.Context) error { return nil })
	if err == nil {
		err = r.warm(wctx, rowLockWarm)
	}
	if err != nil {
		return nil, exitWith(ExitUnavailable, fmt.Errorf("row lock connections to %s failed: %w", st.Desc, plain(redact(rawURL, err))))
	}
	return r, nil
}

// warm takes n row locks at once, on the keys dlock-inventory-warm-0 to
// n-1 (rows kept in the rows table), each held until all n are held, so
// that n of the pool's connections are open and have run the row lock's
// statements once: a PostgreSQL backend's first statements on a table
// (catalog lookups, pgx's prepare) cost tens of milliseconds on a loaded
// machine, which would show as slow refusals in the demo's first run. It
// returns the first error, or ctx's when the pool cannot hold n at once.
func (r rowLock) warm(ctx context.Context, n int) error {
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
			err := r.WithRowLock(ctx, fmt.Sprintf("dlock-inventory-warm-%d", i), func(ctx context.Context) error {
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
