// Package mysqlstore keeps dlock's locks in MySQL or MariaDB, on the
// *sql.DB (go-sql-driver/mysql) the application already has; the store
// never closes it. Three modes share the schema that Migrate creates and
// Schema prints (prefix Options.Table, default "dlock"):
//
//   - New: the lease table, a driver.Mutex with per-key leases on the
//     database clock (UTC_TIMESTAMP(6)), one INSERT ... ON DUPLICATE KEY
//     UPDATE ... RETURNING per Acquire, Extend or Release, one UPDATE per
//     Transfer (driver.Transferer: the Client hands a key to its own next
//     waiter without freeing it), fences from a sequence, free rows swept
//     after Options.Retention. MariaDB 10.5+. Waiters of other processes
//     cannot be woken (no notifications): the first of them marks the row
//     and polls at a pace the store gives it (driver.ContendedError.Retry,
//     1 to 100 ms, growing with its wait), and a released key stays
//     reserved for it until that poll (the waiter mark), so a process that keeps
//     handing the key to its own goroutines no longer starves the others
//     (docs/mysql.md, "Waiting").
//     The same Store is a driver.Semaphore (dlock.NewSemaphores): holdings
//     of permits are rows of <Table>_permits, each with its own expiry;
//     an acquisition is one READ COMMITTED transaction that locks the key's
//     anchor row in <Table>_semaphores; waiters pace (docs/mysql.md,
//     "Semaphore").
//     It is also a driver.RateLimiter (dlock.NewLimiter):
//     each key's TAT (GCRA) is a row of <Table>_rates on the database
//     clock, and a decision is one INSERT ... ON DUPLICATE KEY UPDATE ...
//     RETURNING (docs/mysql.md, "Rate limiter").
//     It is also a driver.Idempotency (dlock.NewGuard): records in
//     <Table>_idempotency, each call a READ COMMITTED transaction under the
//     record's row lock; myguard.DoTx (package mysqlstore/myguard) begins
//     the record (BeginRecordTx, which never waits for a lock), makes the
//     function's writes and completes the record in one transaction
//     (docs/idempotency.md, "The SQL mode").
//     Break (driver.Breaker, dlock release --force) frees a live row
//     whoever holds it in one statement.
//   - NewSession: the session lock, GET_LOCK on connections pinned from the
//     pool (bounded by SessionOptions.MaxConns: ErrConnLimit, never a silent
//     pool exhaustion), lost when its connection dies, waiting in the
//     server's queue (driver.Queuer).
//   - WithRowLock: SELECT ... FOR UPDATE [NOWAIT] on a row of <Table>_rows
//     inside the caller's transaction function, so that the lock and the
//     writes commit or roll back together.
//
// Importing the package registers the URL scheme mysql:// with
// driver.Register (see Open). Use interpolateParams=true in the DSN for one
// round trip per statement. Tested on MariaDB 10.11 only; docs/mysql.md
// says what works on MySQL 8.
//
// # Where to start
//
// Migrate once, then New (the lease table), NewSession (the session lock)
// or WithRowLock (the row lock), and dlock.New for the first two; the
// examples show each. docs/mysql.md in the repository has the long form:
// the three modes, the schema, waiting, doctor and MySQL 8.
package mysqlstore
