// Package pgstore is a dlock store on PostgreSQL: a lease table, one row per
// key held now, with expiry decided on the database clock.
//
// # Model
//
// Store is a driver.Mutex with per-key leases (driver.Model{MinTTL: 1ms,
// Granularity: 1µs, ServerClock: true}). Acquire, Extend, Release and
// Transfer are each one SQL statement, hence one round trip (once pgx has
// prepared it on a connection) and one implicit transaction under READ
// COMMITTED, PostgreSQL's default. Each touches one row of the lease table, so
// contention causes neither serialization failures (SQLSTATE 40001) nor
// deadlocks (40P01). The owner column holds the hex SHA-256 of the token,
// never the token. Expiry is now() + ttl on the server, and a row counts as
// expired once expires_at <= now(). Client clocks do not matter. A step of the
// server's clock moves every lease with it.
//
// Fences come from one sequence (<prefix>_fence), so a fence is greater than
// every fence issued before it for any key, including keys whose rows were
// deleted. Acquisitions of one key take a transaction-scoped advisory lock
// (the two-int form, keyed by the table's and the key's hashes) before they
// draw a fence. Without it, two acquires that waited for the same releasing
// row could insert in the opposite order to their draws.
//
// Released rows are deleted in the release's statement. Rows whose lease ended
// without a release are deleted by the store's sweep every
// Options.SweepInterval (default 1 minute; Store.Sweep runs it by hand), so
// the table holds only the keys held now plus the expired ones not yet swept.
//
// # Waiting
//
// Store is a driver.Notifier. The release of a key's last hold sends
// pg_notify(<prefix>_locks, key) in the same statement, and PostgreSQL
// delivers it when the statement commits. The first Subscribe opens one
// connection of the Store's own, with the pool's settings but not taken from
// the pool (with NewDB it is one pinned connection of the *sql.DB). That
// connection runs LISTEN, and a goroutine hands each notification to the
// key's subscribers. When the connection dies the listener reconnects. Once
// it listens again it wakes every subscriber, because a release in between
// went unheard. It closes its connection 30 s after the last subscriber
// leaves.
//
// # Schema
//
// Migrate (or MigrateDB) creates the schema if it is missing. Schema returns
// the same DDL, for a DBA to review or run: the lease table <prefix>_locks,
// the sequence <prefix>_fence, and the row-lock table <prefix>_rows, which
// the lease mode does not use. The prefix is Options.Table (default "dlock"),
// resolved through the connection's search_path.
//
// # URL
//
// Importing the package registers postgres:// and postgresql:// with
// driver.Open (see Open): the CLI's --store postgres://user@host/db?table=dlock.
package pgstore
