package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"example.com/dlock/driver"
)

// minServerVersion is the oldest PostgreSQL the statements run on (WITH ...
// AS MATERIALIZED is PostgreSQL 12).
const minServerVersion = 120000

// check is one doctor check's recorder.
type addFunc func(name string, st driver.Status, format string, args ...any)

// Doctor implements driver.Doctor: the server's version, whether it is a
// primary (a replica refuses writes: Fail), the default isolation level,
// the clock and time zone, connections in use against max_connections, a
// pooler or proxy in front (PgBouncer), whether a NOTIFY sent through the
// pool reaches a listening connection (not through PgBouncer in transaction
// mode), replicas and their lag, and a probe lock taken and released on the
// store's table. It makes no lasting change.
// A check that cannot run reports Fail with the error.
func (s *Store) Doctor(ctx context.Context, ttl time.Duration) []driver.Check {
	var checks driver.Report
	add := checks.Add
	if !s.checkVersion(ctx, add) {
		return checks
	}
	s.checkRecovery(ctx, add)
	s.checkIsolation(ctx, add)
	s.checkClock(ctx, add)
	s.checkConnections(ctx, add)
	s.checkPooler(ctx, add)
	s.checkNotify(ctx, add)
	s.checkReplicas(ctx, add)
	return append(checks, driver.ProbeLock(ctx, s, max(ttl, time.Second), s.names.locks))
}

func (s *Store) checkVersion(ctx context.Context, add addFunc) bool {
	var version string
	var num int64
	err := s.db.queryRow(ctx, `SELECT current_setting('server_version'), current_setting('server_version_num')::int`, nil, &version, &num)
	if err != nil {
		add("server", driver.Fail, "cannot query the server: %v", err)
		return false
	}
	if num < minServerVersion {
		add("server", driver.Fail, "PostgreSQL %s: the lease table needs PostgreSQL 12 or later", version)
		return true
	}
	add("server", driver.OK, "PostgreSQL %s", version)
	return true
}

func (s *Store) checkRecovery(ctx context.Context, add addFunc) {
	var replica, readOnly bool
	err := s.db.queryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only')::bool`, nil, &replica, &readOnly)
	switch {
	case err != nil:
		add("primary", driver.Fail, "pg_is_in_recovery(): %v", err)
	case replica:
		add("primary", driver.Fail, "the server is a replica (in recovery): it refuses writes, so no lock can be taken; point the store at the primary")
	case readOnly:
		add("primary", driver.Fail, "default_transaction_read_only is on: writes are refused; turn it off for the lock's role or database")
	default:
		add("primary", driver.OK, "the server is a primary and accepts writes")
	}
}

func (s *Store) checkIsolation(ctx context.Context, add addFunc) {
	var iso string
	if err := s.db.queryRow(ctx, `SELECT current_setting('default_transaction_isolation')`, nil, &iso); err != nil {
		add("isolation", driver.Fail, "%v", err)
		return
	}
	if iso != "read committed" {
		add("isolation", driver.Warn, "default_transaction_isolation is %q: under contention lock statements fail with serialization errors (40001), which count as unknown outcomes, and the semaphore's acquisitions are refused; set it to 'read committed' for the lock's connections (ALTER ROLE ... SET default_transaction_isolation = 'read committed')", iso)
		return
	}
	add("isolation", driver.OK, "read committed: lock statements never fail with serialization errors")
}

// checkClock compares the database clock (which decides expiry) with this
// machine's, for information: leases do not depend on client clocks.
func (s *Store) checkClock(ctx context.Context, add addFunc) {
	var tz string
	var dbNow time.Time
	before := time.Now()
	if err := s.db.queryRow(ctx, `SELECT current_setting('TimeZone'), clock_timestamp()`, nil, &tz, &dbNow); err != nil {
		add("clock", driver.Fail, "%v", err)
		return
	}
	after := time.Now()
	mid := before.Add(after.Sub(before) / 2)
	skew := dbNow.Sub(mid).Round(time.Millisecond)
	add("clock", driver.OK, "expiry is decided on the database server's clock (now()), not on clients'; server TimeZone %s (timestamptz is absolute, the zone does not matter); the server's clock is %v ahead of this machine's (±%v), which does not affect leases", tz, skew, after.Sub(before).Round(time.Millisecond))
}

func (s *Store) checkConnections(ctx context.Context, add addFunc) {
	var maxConn, inUse, reserved int64
	err := s.db.queryRow(ctx, `SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int,
  (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')`, nil, &maxConn, &reserved, &inUse)
	if err != nil {
		add("connections", driver.Fail, "%v", err)
		return
	}
	avail := maxConn - reserved
	if inUse*10 >= avail*8 {
		add("connections", driver.Warn, "%d client connections of %d available (max_connections %d less %d reserved): near the limit, a new pool or listener may be refused", inUse, avail, maxConn, reserved)
		return
	}
	add("connections", driver.OK, "%d client connections of %d available (max_connections %d); the lease table pins none, the store's listener uses one while anyone waits", inUse, avail, maxConn)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
