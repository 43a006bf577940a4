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
