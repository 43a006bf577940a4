package pgstore

import "strings"

// WithoutFenceLock removes the advisory lock from s's acquire statement,
// for the negative control of the fence-order test.
func WithoutFenceLock(s *Store) {
	q := s.sql.acquire
	start := strings.Index(q, "WITH lk AS MATERIALIZED")
	end := strings.Index(q, "INSERT INTO")
	q = q[:start] + q[end:]
	s.sql.acquire = strings.Replace(q, " FROM lk", "", 1)
}

// WithNotifyAlways makes s's release send NOTIFY for every deleted row,
// marked or not (the behaviour before the waited column), for the negative
// control of the notify-only-when-waited test.
func WithNotifyAlways(s *Store) {
	s.sql.release = strings.Replace(s.sql.release, " FROM d WHERE d.waited)", " FROM d)", 1)
}
