package dlock

import "time"

// SetWriterRetry sets how long a waiting writer may pause between attempts
// and returns a function that restores it: the negative control of the
// tests that a writer's wait keeps its writer-waiting mark live.
func SetWriterRetry(d time.Duration) (restore func()) {
	old := writerRetry
	writerRetry = d
	return func() { writerRetry = old }
}
