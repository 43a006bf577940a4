package pgstore

import "strings"

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
