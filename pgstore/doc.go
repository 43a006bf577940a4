// Package pgstore is a dlock store on PostgreSQL, in three modes over one
// schema (Migrate creates it, Schema prints it):
//
//   - the lease table (New, NewDB): one row per key locked lately, with
//     expiry decided on the database clock; the default, described below;
//   - the session lock (NewSession): pg_advisory_lock on connections pinned
//     from your pool, no TTL, a lock lives as long as its connection, fences
//     from the same sequence (docs/postgres-modes.md);
//   - the row lock (WithRowLock, WithRowLockDB): SELECT ... FOR UPDATE
//     [NOWAIT] in a transaction that runs your function, so the lock and
//     your writes commit or roll back together (docs/postgres-modes.md).
//
// The URL opener (postgres://, postgresql://) opens the lease table, or the
// session lock with mode=session.
//
// # Model
//
// Store is a driver.Mutex with per-key leases (driver.Model{MinTTL: 1ms,
// Granularity: 1µs, ServerClock: true}). Acquire, Extend, Release and
// Transfer are each one SQL statement, hence one round trip (once pgx has
// prepared it on a connection) and one implicit transaction under READ
// COMMITTED, PostgreSQL's default. Two cases take a second statement: the
// Acquire of a key that has no row (never locked, or swept since) inserts
// one, and a refused Release asks whether another owner holds the key. Each
// statement touches one row of the lease table, so contention causes
// neither serialization failures (SQLSTATE 40001) nor deadlocks (40P01).
// The owner column holds the hex SHA-256 of the token, never the token.
// Expiry is now() + ttl on the server, and a row counts as expired (free)
// once expires_at <= now(). Client clocks do not matter. A step of the
// server's clock moves every lease with it.
//
// Break (driver.Breaker, dlock release --force) is one statement too: it
// frees the key's live row whoever holds it, with the expiry -infinity
// that Extend and Release read as the broken owner's mark (see
// Store.Break).
//
// Fences come from one sequence (<prefix>_fence), so a fence is greater than
// every fence issued before it for any key, including keys whose rows were
// deleted. Acquire updates the key's row in place and draws the fence in
// the UPDATE, under the row lock, so fences follow the holding order. Only
// the insert of a key without a row draws before it may wait on a
// conflicting row; it takes a transaction-scoped advisory lock first (the
// two-int form, keyed by the table's and the key's hashes), and the sweep
// deletes a row only under that lock (a try-lock), so no row can be created,
// held and deleted between an insert's draw and its write.
//
// A release frees the row (its expiry set to the epoch) and keeps it, so
// that the key's next Acquire is an update of one row, with no new index
// entry. Free rows and rows whose lease ended without a release are deleted
// by the store's sweep every Options.SweepInterval (default 1 minute;
// Store.Sweep runs it by hand), so the table holds the keys held now plus
// those whose holding ended less than about a sweep interval ago.
//
// # Waiting
//
// Store is a driver.Notifier. The release of a holding's last hold sends
// pg_notify(<prefix>_locks, key) in the same statement when someone waited
// for that holding: a contended Acquire marks the row (waited) in the same
// statement, and so does Subscribe for the key's current holding. A release
// nobody waited for sends nothing, which spares its commit PostgreSQL's
// notification queue (a global lock and a write). PostgreSQL delivers a
// NOTIFY when the statement commits. The first Subscribe opens one
// connection of the Store's own, with the pool's settings but not taken from
// the pool (with NewDB it is one pinned connection of the *sql.DB). That
// connection runs LISTEN, and a goroutine hands each notification to the
// key's subscribers. When the connection dies the listener reconnects. Once
// it listens again it wakes every subscriber, because a release in between
// went unheard. It closes its connection 30 s after the last subscriber
// leaves. Each new connection first proves that it hears what others send:
// a probe NOTIFY sent through the pool must arrive within 2 s. Behind a
// pooler in transaction or statement mode (PgBouncer) it does not, and
// Subscribe reports notifications unsupported, so waiters back off instead
// of sleeping until the holder's lease would end (docs/postgres.md,
// "Behind PgBouncer").
//
// # Semaphore
//
// The lease table's Store is also a driver.Semaphore (use it with
// dlock.NewSemaphores): each holding of permits is a row of
// <prefix>_permits with its own expiry on the database clock and a fence
// from the lease table's sequence. AcquirePermits is one statement, a call
// of a PL/pgSQL function that serializes the key's acquirers on a
// transaction-scoped advisory lock (READ COMMITTED only); a release sends
// NOTIFY, which SubscribePermits hears on the store's listener
// (docs/postgres.md, "The Semaphore").
//
// # Idempotency records
//
// The Store is also a driver.Idempotency (use it with dlock.NewGuard): one
// row per record in <prefix>_idempotency, a fence from the lease table's
// sequence, leases and retention on the database clock; a begin is one
// statement, a call of the PL/pgSQL function <prefix>_idempotency_begin.
// pgguard.DoTx (package pgstore/pgguard) is the guard's SQL mode: the
// record's begin (BeginRecordTx, which never waits for another
// transaction), the function's writes and the record's completion
// (CompleteRecordTx) commit in one transaction, so writes to this database
// happen exactly once, even across crashes (docs/idempotency.md, "The SQL
// mode").
//
// # Rate limiter
//
// The lease table's Store is also a driver.RateLimiter (use it with
// dlock.NewLimiter): each key's TAT (GCRA) is a row of <prefix>_rates in
// µs on the database clock. AllowN is one statement, a call of a PL/pgSQL
// function whose INSERT ... ON CONFLICT DO UPDATE admits under the key's
// row lock; a denial writes nothing. The sweep deletes keys whose TAT has
// passed (docs/postgres.md, "The rate limiter").
//
// # Schema
//
// Migrate (or MigrateDB) creates the schema if it is missing, and adds the
// waited column to a lease table made by an earlier version. Schema returns
// the same DDL, for a DBA to review or run: the lease table <prefix>_locks,
// the sequence <prefix>_fence, the row-lock table <prefix>_rows, which
// the lease mode does not use, the Semaphore's permits table
// <prefix>_permits with its function <prefix>_permits_acquire, the
// idempotency records <prefix>_idempotency with their functions
// <prefix>_idempotency_begin and _begin_tx, and the rate limiter's table <prefix>_rates
// with its function <prefix>_rates_allow. The prefix is Options.Table (default "dlock"),
// resolved through the connection's search_path.
//
// # URL
//
// Importing the package registers postgres:// and postgresql:// with
// driver.Open (see Open): the CLI's --store postgres://user@host/db?table=dlock.
//
// # Where to start
//
// Migrate once, then New (the lease table), NewSession (the session lock)
// or WithRowLock (the row lock), and dlock.New for the first two; the
// examples show each. docs/postgres.md (the lease table) and
// docs/postgres-modes.md (the session and row locks) in the repository have
// the long form.
package pgstore
