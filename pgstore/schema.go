package pgstore

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultTable is the prefix of the schema's object names when
// Options.Table is empty.
const DefaultTable = "dlock"

// tablePattern is what Options.Table may be: a lower-case SQL identifier
// short enough that every derived name stays under PostgreSQL's 63 bytes.
var tablePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

// names are the schema's object names for one prefix.
type names struct {
	locks, fence, rows string
	// permits is the Semaphore holdings' table (also the NOTIFY channel
	// of permit releases), acquirePermits its acquisition function.
	permits, acquirePermits string
	// idem is the idempotency records' table, beginRecord its begin
	// function, beginRecordTx the folded begin's (in the caller's
	// transaction).
	idem, beginRecord, beginRecordTx string
	// rates is the RateLimiter's table, allowRate its decision function.
	rates, allowRate string
	// rw is the RWMutex holdings' and marks' table, acquireRW its
	// acquisition function.
	rw, acquireRW string
}

// namesFor validates prefix (empty: DefaultTable) and derives the names.
func namesFor(prefix string) (names, error) {
	if prefix == "" {
		prefix = DefaultTable
	}
	if !tablePattern.MatchString(prefix) {
		return names{}, fmt.Errorf("%w: pgstore: table prefix %q: want a lower-case SQL identifier of at most 40 bytes ([a-z_][a-z0-9_]*)", driver.ErrInvalid, prefix)
	}
	return names{locks: prefix + "_locks", fence: prefix + "_fence", rows: prefix + "_rows",
		permits: prefix + "_permits", acquirePermits: prefix + "_permits_acquire",
		idem: prefix + "_idempotency", beginRecord: prefix + "_idempotency_begin", beginRecordTx: prefix + "_idempotency_begin_tx",
		rates: prefix + "_rates", allowRate: prefix + "_rates_allow",
		rw: prefix + "_rwlocks", acquireRW: prefix + "_rwlocks_acquire"}, nil
}

// channel is the NOTIFY channel of releases: the lease table's name.
func (n names) channel() string { return n.locks }

// Schema returns the DDL that Migrate runs for opts.Table, for a DBA to read
// or run by hand: the lease table (<prefix>_locks), the fence sequence
// (<prefix>_fence), the row-lock table (<prefix>_rows), each created only
// if missing, and the Semaphore's permits table (<prefix>_permits, created
// if missing) with its acquisition function (<prefix>_permits_acquire,
// created or replaced), the idempotency records' table
// (<prefix>_idempotency, created if missing) with its begin functions
// (<prefix>_idempotency_begin and _begin_tx, created or replaced), and the RateLimiter's
// rates table (<prefix>_rates, created if missing) with its decision
// function (<prefix>_rates_allow, created or replaced), and the RWMutex's
// table (<prefix>_rwlocks, created if missing) with its acquisition
// function (<prefix>_rwlocks_acquire, created or replaced). It returns the DDL
// for DefaultTable if opts.Table is not a valid prefix (New and Migrate
// reject it).
func Schema(opts Options) string {
	n, err := namesFor(opts.Table)
	if err != nil {
		n, _ = namesFor(DefaultTable)
	}
	return ddl(n)
}

// ddl is the schema of n: the lease table, the sequence, the row-lock
// table, the permits table and its function, the records table and its
// function, the rates table and its function, the read-write lock's table
// and its function.
func ddl(n names) string {
	return fmt.Sprintf(schemaTemplate, n.locks, n.fence, n.rows) + fmt.Sprintf(permitsTemplate, n.permits, n.fence, n.acquirePermits) +
		fmt.Sprintf(recordsTemplate, n.idem, n.fence, n.beginRecord, n.beginRecordTx) + fmt.Sprintf(ratesTemplate, n.rates, n.allowRate) +
		fmt.Sprintf(rwTemplate, n.rw, n.fence, n.acquireRW)
}

// schemaTemplate: %[1]s lease table, %[2]s fence sequence, %[3]s row table.
// No index on expires_at: the table holds only keys held now or lately
// (free and expired rows are swept), so the sweep's scan is short, and
// without that index every update of a row (re-entry, extension, a
// contended attempt) can be a HOT update that writes no index entry.
const schemaTemplate = `-- dlock lease table: one row per key held now or lately (a released
-- row stays, free, for the key's next acquire, until the sweep).
-- owner is the hex SHA-256 of the holder's token, never the token.
-- expires_at is on the database clock (now() of the statement that set it).
CREATE TABLE IF NOT EXISTS %[1]s (
    name       text        PRIMARY KEY,
    owner      text        NOT NULL,
    holds      integer     NOT NULL CHECK (holds > 0),
    fence      bigint      NOT NULL CHECK (fence > 0),
    expires_at timestamptz NOT NULL,
    waited     boolean     NOT NULL DEFAULT false
);
-- waited: someone waits for this holding (a contended acquire or a
-- subscriber marked it), so its release sends NOTIFY. Added to tables
-- created before it (a metadata-only change).
ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS waited boolean NOT NULL DEFAULT false;
-- meta: the holder metadata of the holding whose fence it starts with,
-- "<fence>:<metadata>" (dlock.WithMeta); shown only while that holding
-- lasts. Added to tables created before it (a metadata-only change).
ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS meta text;

-- Fences: one sequence for every key, so a fence is greater than every
-- fence issued before it, also after the key's row was deleted.
CREATE SEQUENCE IF NOT EXISTS %[2]s AS bigint MINVALUE 1 NO CYCLE;

-- Row-lock mode: one row per name, locked with SELECT ... FOR UPDATE in the
-- caller's transaction.
CREATE TABLE IF NOT EXISTS %[3]s (
    name text PRIMARY KEY
);
`

// migrationLock is the advisory lock key that serializes concurrent
// migrations (CREATE ... IF NOT EXISTS alone can fail when two sessions
// create the same object at once).
const migrationLock = "SELECT pg_advisory_xact_lock(hashtext('dlock migrate ' || %s));\n"

// migration returns the whole migration as one simple-protocol message:
// PostgreSQL runs it as one transaction, the advisory lock held to its end.
func migration(n names) string {
	return fmt.Sprintf(migrationLock, quoteLiteral(n.locks)) + ddl(n)
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Migrate creates the schema for opts.Table (Schema) in pool's database if
// it is missing. It is idempotent and safe to run from several processes at
// once (they take turns on an advisory lock), and changes nothing that
// exists. It needs the CREATE privilege on the schema of the search path;
// without it the error matches driver.ErrRefused. An invalid prefix returns
// an error matching driver.ErrInvalid before any I/O.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts Options) error {
	n, err := namesFor(opts.Table)
	if err != nil {
		return err
	}
	if pool == nil {
		return fmt.Errorf("%w: pgstore: nil pool", driver.ErrInvalid)
	}
	if _, err := pool.Exec(ctx, migration(n)); err != nil {
		return wrap("migrate", err)
	}
	return nil
}

// MigrateDB is Migrate for a *sql.DB. With the pgx stdlib driver (or any
// driver that runs a statement without arguments as one simple query) the
// migration is one transaction, as with Migrate. Errors are as for
// Migrate.
func MigrateDB(ctx context.Context, db *sql.DB, opts Options) error {
	n, err := namesFor(opts.Table)
	if err != nil {
		return err
	}
	if db == nil {
		return fmt.Errorf("%w: pgstore: nil db", driver.ErrInvalid)
	}
	if _, err := db.ExecContext(ctx, migration(n)); err != nil {
		return wrap("migrate", err)
	}
	return nil
}
