package pgstore

import (
	"context"
	"strings"
	"time"

	"example.com/dlock/driver"
)

// WithEarlyFence makes s's acquire draw its fence once, at the start of
// the statement, before it holds the row lock (a statement that waits for
// the row then writes the fence it drew before the wait), for the negative
// control of the fence-order test.
func WithEarlyFence(s *Store) {
	draw := "nextval('" + s.names.fence + "')"
	q := "WITH f AS MATERIALIZED (SELECT " + draw + " AS v) " + s.sql.acquire
	s.sql.acquire = strings.ReplaceAll(q, "THEN "+draw+" ELSE", "THEN (SELECT v FROM f) ELSE")
}

// WithNotifyAlways makes s's release send NOTIFY for every freed holding,
// marked or not (the behaviour before the waited column), for the negative
// control of the notify-only-when-waited test.
func WithNotifyAlways(s *Store) {
	s.sql.release = strings.Replace(s.sql.release, " AND l.waited THEN", " THEN", 1)
}

// WithoutProbe turns off the probe NOTIFY of s's listener connections
// (before its first Subscribe), for the negative control of the
// deaf-listener test: behind a pooler in transaction mode, Subscribe then
// succeeds on a connection that hears nothing.
func WithoutProbe(s *Store) { s.lis.probeWait = 0 }

// WithoutFenceCheck makes s's CompleteRecordTx complete the record
// whoever owns it (no fence or state check), for the negative control of
// the stale-executor test.
func WithoutFenceCheck(s *Store) {
	s.rsql.completeTx = strings.Replace(s.rsql.completeTx, "AND i.fence = $3 AND NOT i.done", "AND $3::bigint > 0", 1)
}

// RacyAllowN is AllowN as two statements without a lock between them: a
// read of the key's TAT, driver.GCRA in Go, then a write of the new TAT
// (last writer wins). It is the wrong design that the exactness test's
// control must catch.
func (s *Store) RacyAllowN(ctx context.Context, key string, limit driver.RateLimit, n int) (driver.RateResult, error) {
	iv := micros(limit.Interval())
	var tat, now int64
	err := s.db.queryRow(ctx, `SELECT coalesce((SELECT tat FROM `+s.names.rates+` WHERE name = $1), 0), `+nowMicros, []any{key}, &tat, &now)
	if err != nil {
		return driver.RateResult{}, err
	}
	lim := driver.RateLimit{Rate: 1, Period: time.Duration(iv) * time.Microsecond, Burst: limit.Burst}
	r, next := driver.GCRA(time.UnixMicro(now), time.UnixMicro(tat), lim, n)
	if r.Allowed == 0 {
		return r, nil
	}
	_, err = s.db.exec(ctx, `INSERT INTO `+s.names.rates+` (name, tat) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET tat = $2`, key, next.UnixMicro())
	return r, err
}

// WithWaitingFoldedBegin makes s's BeginRecordTx call the plain begin
// function in the transaction, without the advisory lock, for the negative
// control of the in-flight test: a duplicate then waits for the running
// transaction (its INSERT for the uncommitted row).
func WithWaitingFoldedBegin(s *Store) { s.rsql.beginTx = s.rsql.begin }
