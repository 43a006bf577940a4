package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"example.com/dlock/driver"
)

// Doctor implements driver.Doctor. It checks what matters for locks on this
// server: version and flavour,
// isolation level, clock and time zone, connection headroom, read-only and
// replica status, the schema, and a probe lock taken and released.
func (s *Store) Doctor(ctx context.Context, ttl time.Duration) []driver.Check {
	checks := serverChecks(ctx, s.db, true)
	checks = append(checks, schemaCheck(ctx, s.db, s.n))
	return append(checks, driver.ProbeLock(ctx, s, max(ttl, MinTTL), ""))
}

// Doctor implements driver.Doctor: the server checks for the session lock
// (which needs neither RETURNING nor the lease table) and a probe lock.
func (s *Session) Doctor(ctx context.Context, ttl time.Duration) []driver.Check {
	checks := serverChecks(ctx, s.db, false)
	return append(checks, driver.ProbeLock(ctx, s, max(ttl, MinTTL), ""))
}

func serverChecks(ctx context.Context, db *sql.DB, lease bool) []driver.Check {
	return []driver.Check{
		versionCheck(ctx, db, lease),
		isolationCheck(ctx, db),
		clockCheck(ctx, db),
		connCheck(ctx, db),
		readOnlyCheck(ctx, db),
		replicaCheck(ctx, db),
	}
}

func scalar(ctx context.Context, db *sql.DB, q string) (string, error) {
	var v sql.NullString
	err := db.QueryRowContext(ctx, q).Scan(&v)
	return v.String, err
}

func failed(name string, err error) driver.Check {
	return driver.Check{Name: name, Status: driver.Fail, Detail: err.Error()}
}

func versionCheck(ctx context.Context, db *sql.DB, lease bool) driver.Check {
	const name = "server version"
	v, err := scalar(ctx, db, "SELECT VERSION()")
	if err != nil {
		return failed(name, err)
	}
	maria := strings.Contains(strings.ToLower(v), "mariadb")
	major, minor := versionNumbers(v)
	switch {
	case lease && !maria:
		return driver.Check{Name: name, Status: driver.Fail, Detail: v + ": MySQL has no CREATE SEQUENCE nor INSERT ... RETURNING; the lease table needs MariaDB 10.5+ (use mode=session or WithRowLock on MySQL)"}
	case maria && (major < 10 || major == 10 && minor < 5):
		return driver.Check{Name: name, Status: driver.Fail, Detail: v + ": MariaDB 10.5+ needed (INSERT ... RETURNING); tested on 10.11"}
	}
	return driver.Check{Name: name, Status: driver.OK, Detail: v}
}

func versionNumbers(v string) (int, int) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(parts[1])
	return major, minor
}

func isolationCheck(ctx context.Context, db *sql.DB) driver.Check {
	const name = "isolation level"
	v, err := scalar(ctx, db, "SELECT @@transaction_isolation")
	if err != nil {
		v, err = scalar(ctx, db, "SELECT @@tx_isolation") // MariaDB before 11.1
	}
	if err != nil {
		return failed(name, err)
	}
	return driver.Check{Name: name, Status: driver.OK, Detail: v + " by default; the lease statements are single autocommit statements and WithRowLock runs READ COMMITTED, so any level works"}
}

func clockCheck(ctx context.Context, db *sql.DB) driver.Check {
	const name = "clock and time zone"
	var tz, sys string
	err := db.QueryRowContext(ctx, "SELECT @@time_zone, @@system_time_zone").Scan(&tz, &sys)
	if err != nil {
		return failed(name, err)
	}
	var dbNow time.Time
	start := time.Now()
	if err := db.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6)").Scan(&dbNow); err != nil {
		return failed(name, err)
	}
	off := dbNow.Sub(start.UTC().Add(time.Since(start) / 2)).Round(time.Millisecond)
	d := fmt.Sprintf("time_zone %s, system_time_zone %s; expiry uses UTC_TIMESTAMP(6), so time zones do not matter; server clock %v from this host's", tz, sys, off)
	if off > time.Second || off < -time.Second {
		return driver.Check{Name: name, Status: driver.Warn, Detail: d + " (harmless for locks, which use the server's clock alone, but check NTP)"}
	}
	return driver.Check{Name: name, Status: driver.OK, Detail: d}
}

func connCheck(ctx context.Context, db *sql.DB) driver.Check {
	const name = "connections"
	maxc, err := scalar(ctx, db, "SELECT @@max_connections")
	if err != nil {
		return failed(name, err)
	}
	var vname, used string
	if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&vname, &used); err != nil {
		return failed(name, err)
	}
	m, _ := strconv.Atoi(maxc)
	u, _ := strconv.Atoi(used)
	d := fmt.Sprintf("%d of max_connections %d in use; each session lock connection pins one (SessionOptions.MaxConns)", u, m)
	if m > 0 && u*10 > m*8 {
		return driver.Check{Name: name, Status: driver.Warn, Detail: d + ": over 80%, session locks may not get a connection"}
	}
	return driver.Check{Name: name, Status: driver.OK, Detail: d}
}

func readOnlyCheck(ctx context.Context, db *sql.DB) driver.Check {
	const name = "read_only"
	v, err := scalar(ctx, db, "SELECT @@global.read_only")
	if err != nil {
		return failed(name, err)
	}
	if v != "0" {
		return driver.Check{Name: name, Status: driver.Fail, Detail: "the server is read-only: locks cannot be written (point the store at the primary)"}
	}
	return driver.Check{Name: name, Status: driver.OK, Detail: "writable"}
}

func replicaCheck(ctx context.Context, db *sql.DB) driver.Check {
	const name = "replication"
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return driver.Check{Name: name, Status: driver.Warn, Detail: "could not check (needs the REPLICA MONITOR or REPLICATION CLIENT privilege): " + err.Error()}
	}
	defer rows.Close()
	if rows.Next() {
		return driver.Check{Name: name, Status: driver.Warn, Detail: "this server is a replica: locks must live on the primary, never on a replica (replication lag would let two owners in)"}
	}
	return driver.Check{Name: name, Status: driver.OK, Detail: "not a replica; locks are only as safe as the primary: a failover to an asynchronous replica can lose recent lock rows"}
}

func schemaCheck(ctx context.Context, db *sql.DB, n names) driver.Check {
	const name = "schema"
	if _, err := db.ExecContext(ctx, "SELECT 1 FROM "+n.locks+" LIMIT 0"); err != nil {
		return driver.Check{Name: name, Status: driver.Fail, Detail: "table " + n.locks + " missing or unreadable (run mysqlstore.Migrate, or the DDL of mysqlstore.Schema): " + err.Error()}
	}
	if _, err := db.ExecContext(ctx, "SELECT next_owner, next_since, next_due FROM "+n.locks+" LIMIT 0"); err != nil {
		return driver.Check{Name: name, Status: driver.Fail, Detail: "table " + n.locks + " predates the waiter mark (run mysqlstore.Migrate again: it adds the columns): " + err.Error()}
	}
	var rows int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+n.locks).Scan(&rows); err != nil {
		return failed(name, err)
	}
	for _, t := range []struct{ table, feature string }{{n.permits, "the semaphore"}, {n.semaphores, "the semaphore"}, {n.idem, "the idempotency guard"}, {n.rates, "the rate limiter"},
		{n.rwHolds, "the read-write lock"}, {n.rwKeys, "the read-write lock"}} {
		if _, err := db.ExecContext(ctx, "SELECT 1 FROM "+t.table+" LIMIT 0"); err != nil {
			return driver.Check{Name: name, Status: driver.Warn, Detail: "table " + t.table + " missing or unreadable: locks work, " + t.feature + " does not (run mysqlstore.Migrate again: it adds the table): " + err.Error()}
		}
	}
	return driver.Check{Name: name, Status: driver.OK, Detail: fmt.Sprintf("%s present, %d rows (held and recently freed keys); the semaphore's, the idempotency records', the rate limiter's and the read-write lock's tables present", n.locks, rows)}
}
