package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"

	"example.com/dlock/driver"
)

// DefaultTable is the table prefix when Options.Table is empty.
const DefaultTable = "dlock"

// MaxKeyBytes is the longest key the lease table and the row lock accept (the
// primary key column is VARBINARY(MaxKeyBytes); InnoDB indexes up to 3072
// bytes). Longer keys are refused with driver.ErrInvalid.
const MaxKeyBytes = 1024

var tableRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// names are the schema objects of one prefix.
type names struct {
	locks, fence, rows string
	// permits holds the Semaphore's holdings; semaphores one anchor row
	// per key, locked by each acquisition.
	permits, semaphores string
	// idem holds the idempotency records.
	idem string
	// rates holds the RateLimiter's TATs.
	rates string
	// rwHolds holds the RWMutex's holdings; rwKeys one anchor row per key,
	// locked by each acquisition, with the writer-waiting mark.
	rwHolds, rwKeys string
}

// tableNames validates prefix (letters, digits, underscores, at most 48,
// not starting with a digit) and returns the object names.
func tableNames(prefix string) (names, error) {
	if prefix == "" {
		prefix = DefaultTable
	}
	if !tableRE.MatchString(prefix) {
		return names{}, fmt.Errorf("%w: mysqlstore: table prefix %q: want letters, digits and _ (at most 48, not starting with a digit)", driver.ErrInvalid, prefix)
	}
	return names{locks: prefix + "_locks", fence: prefix + "_fence", rows: prefix + "_rows",
		permits: prefix + "_permits", semaphores: prefix + "_semaphores", idem: prefix + "_idempotency", rates: prefix + "_rates",
		rwHolds: prefix + "_rwholds", rwKeys: prefix + "_rwkeys"}, nil
}

// ddl returns the statements that create the schema, each idempotent.
//
//   - <p>_locks, the lease table: one row per key held or recently freed.
//     name is the key's bytes; owner the SHA-256 digest of the holder's
//     token (never the token); holds the re-entry count; fence the
//     holding's fence; expires_at the expiry on the database clock, in UTC
//     (UTC_TIMESTAMP(6): the session time_zone does not matter). A row with
//     expires_at in the past is free. The index on expires_at serves the
//     sweep. next_owner, next_since and next_due are the waiter mark
//     (mark.go): the digest of the waiter next in line, when it first
//     marked, and when the mark goes stale; NULL when no waiter is marked.
//     A free row with a fresh mark is reserved for that waiter. meta is the
//     holder metadata (dlock.WithMeta) as "<fence>:<metadata>", shown only
//     while the row's fence is that one. Tables created before the mark or
//     meta gain their columns (ALTER TABLE ... ADD COLUMN IF NOT EXISTS,
//     MariaDB 10.0.2+).
//   - <p>_fence, a sequence (MariaDB 10.3+) giving the fences: strictly
//     increasing across every key and surviving row deletion (a restart may
//     skip a cached block: fences then jump, never go back).
//   - <p>_rows, the row-lock table: one row per key, created on first use,
//     locked with SELECT ... FOR UPDATE by WithRowLock.
//   - <p>_permits and <p>_semaphores, the Semaphore's (permitsDDL).
//   - <p>_idempotency, the idempotency records (recordsDDL).
//   - <p>_rates, the RateLimiter's (ratesDDL).
//   - <p>_rwholds and <p>_rwkeys, the RWMutex's (rwHoldsDDL, rwKeysDDL).
func (n names) ddl() []string {
	return []string{
		"CREATE TABLE IF NOT EXISTS " + n.locks + ` (
  name VARBINARY(1024) NOT NULL,
  owner BINARY(32) NOT NULL,
  holds INT NOT NULL,
  fence BIGINT UNSIGNED NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  next_owner BINARY(32) NULL,
  next_since DATETIME(6) NULL,
  next_due DATETIME(6) NULL,
  meta VARBINARY(300) NULL,
  PRIMARY KEY (name),
  KEY expires_at (expires_at)
) ENGINE=InnoDB`,
		"ALTER TABLE " + n.locks + " ADD COLUMN IF NOT EXISTS next_owner BINARY(32) NULL," +
			" ADD COLUMN IF NOT EXISTS next_since DATETIME(6) NULL, ADD COLUMN IF NOT EXISTS next_due DATETIME(6) NULL",
		"ALTER TABLE " + n.locks + " ADD COLUMN IF NOT EXISTS meta VARBINARY(300) NULL",
		"CREATE SEQUENCE IF NOT EXISTS " + n.fence + " START WITH 1 INCREMENT BY 1 NO MAXVALUE NOCYCLE ENGINE=InnoDB",
		"CREATE TABLE IF NOT EXISTS " + n.rows + ` (
  name VARBINARY(1024) NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB`,
		n.permitsDDL(), n.semaphoresDDL(), n.recordsDDL(), n.recordsTookDDL(), n.ratesDDL(),
		n.rwHoldsDDL(), n.rwKeysDDL(),
	}
}

// Schema returns the DDL Migrate runs for opts, as a script for a DBA to
// read or run by hand (each statement ends with ";"). If opts.Table is not
// a valid prefix it returns the DDL for DefaultTable (New and Migrate
// reject the prefix with driver.ErrInvalid).
func Schema(opts Options) string {
	n, err := tableNames(opts.Table)
	if err != nil {
		n, _ = tableNames(DefaultTable)
	}
	var b strings.Builder
	b.WriteString("-- dlock schema for MariaDB 10.5+ (tested on 10.11), prefix " + strings.TrimSuffix(n.locks, "_locks") + "\n")
	for _, s := range n.ddl() {
		b.WriteString(s + ";\n")
	}
	return b.String()
}

// Migrate creates the schema for opts if it is missing and adds the waiter
// mark's columns to a lease table created before them, and took to a
// records table created before it (a table that has them is left as it
// is); it is idempotent and changes nothing else that
// exists. Adding the columns rebuilds nothing on MariaDB 10.3+ (instant
// ADD COLUMN of nullable columns at the end), but takes a metadata lock:
// run it when no statement holds the table for long. It needs CREATE privileges (without them it fails with an error matching driver.ErrRefused,
// as it does when the server refuses the connection: a wrong password, no
// such database). On MySQL (no
// CREATE SEQUENCE) it fails with an error matching driver.ErrRefused: the
// lease table is MariaDB-only (see docs/mysql.md). It returns an error
// matching driver.ErrInvalid for a bad Options.Table.
func Migrate(ctx context.Context, db *sql.DB, opts Options) error {
	n, err := tableNames(opts.Table)
	if err != nil {
		return err
	}
	if db == nil {
		return fmt.Errorf("%w: mysqlstore: nil *sql.DB", driver.ErrInvalid)
	}
	for _, s := range n.ddl() {
		if _, err := db.ExecContext(ctx, s); err != nil {
			if strings.Contains(s, "SEQUENCE") && isSyntaxError(err) {
				return fmt.Errorf("%w: mysqlstore: the server has no CREATE SEQUENCE (MySQL?): the lease table needs MariaDB 10.3+: %v", driver.ErrRefused, err)
			}
			if deniedPrivilege(err) {
				return fmt.Errorf("%w: mysqlstore: migrate: the database user may not create the schema (it needs CREATE, ALTER and INDEX on the database): %w", driver.ErrRefused, err)
			}
			if refusedConn(err) { // a wrong password or database: as Open's ping answers
				return fmt.Errorf("%w: mysqlstore: migrate: %w", driver.ErrRefused, err)
			}
			return fmt.Errorf("mysqlstore: migrate: %w", err)
		}
	}
	return nil
}
