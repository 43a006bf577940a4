package zkstore

// SetUnprotected makes s retry a create that lost its connection without
// looking for the node it may have made: the naive client of the
// protected-mode test's negative control.
func SetUnprotected(s *Store, on bool) { s.unprotected = on }

// SetCreateFirst makes s's Acquire create its node without listing the
// lock path first (the variant measured by BenchmarkAcquireStrategy).
func SetCreateFirst(s *Store, on bool) { s.createFirst = on }

// Syncs returns how many syncs s has sent for its calls (KeepAlive's not
// counted).
func Syncs(s *Store) int64 { return s.syncs.Load() }

// ConnLoss is connLoss: a raw transport error marked as a connection loss.
var ConnLoss = connLoss
