package driver

import "context"

// RowLocker is implemented by stores on a database with row locks (the SQL
// stores): the seed articles' SELECT ... FOR UPDATE, the way Quartz locks.
// WithRowLock runs a function inside a transaction of the store's
// connection pool that holds the row of key in the store's row table (of
// its table prefix; created by Schemer's Migrate), and ends the
// transaction when the function returns: the lock lives exactly as long as
// the transaction, so a holder whose connection dies loses it at once.
// There is no lease, renewal or fence; see the store package's own
// WithRowLock to write in the same transaction.
//
// Each call holds one connection of the store's pool until it returns (and
// a second one briefly the first time a key is used, to create its row):
// size the pool for the calls that run at once (OpenHints.Conns, or the
// URL's pool size).
//
// Absent: the store's database has no row lock (Redis, etcd, ZooKeeper, the
// in-memory store). Nothing falls back to a lease lock; a caller that needs
// a row lock has none on such a store, and says so (the CLI's demo does not
// offer its sql-for-update strategy there and refuses it, exit 64).
type RowLocker interface {
	// WithRowLock locks key's row and runs fn in the transaction that holds
	// it, with a context that ends when ctx does. It commits when fn
	// returns nil; if fn returns an error or panics it rolls back (the
	// panic goes on) and returns fn's error. When another transaction
	// holds the row it fails at once with an error matching ErrNotAcquired
	// (a *ContendedError) if opts.NoWait is set; otherwise it waits for the
	// row until ctx ends, and then returns an error matching ErrNotAcquired
	// and ctx's error. In both cases fn did not run. An invalid key
	// returns an error matching ErrInvalid before any I/O. A commit whose
	// answer is lost has an unknown outcome: its error matches no
	// sentinel.
	WithRowLock(ctx context.Context, key string, opts RowLockOptions, fn func(ctx context.Context) error) error
}

// RowLockOptions configure RowLocker.WithRowLock.
type RowLockOptions struct {
	// NoWait fails at once when another transaction holds the row (SELECT
	// ... FOR UPDATE NOWAIT) instead of waiting for it.
	NoWait bool
}
