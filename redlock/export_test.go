package redlock

import "time"

// Hooks into a Store's worker pool for the external tests (pool.go).

// SetWorkerIdle sets how long s's workers wait for a task before they exit.
// Call it before s's first call.
func SetWorkerIdle(s *Store, d time.Duration) { s.pool.idle = d }

// SetWorkerCap sets the cap on s's live workers. Call it before s's first
// call.
func SetWorkerCap(s *Store, n int) { s.pool.max = n }

// GoroutinesStarted counts the goroutines s's fan-outs started so far:
// workers and one-off goroutines.
func GoroutinesStarted(s *Store) int64 { return s.pool.started.Load() }

// LiveWorkers is the number of s's workers that have not exited.
func LiveWorkers(s *Store) int {
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	return s.pool.workers
}
