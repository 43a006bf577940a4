package pgstore_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5"
)

// Uncontended critical sections on the shared server: the session lock
// (one statement to lock, one to unlock, on a pinned connection) and the
// row lock (BEGIN, SELECT ... FOR UPDATE, COMMIT).
func BenchmarkSessionLockUnlock(b *testing.B) { benchSessionLockUnlock(b, false) }

// BenchmarkSessionLockUnlockNoGuard is the same without the lock
// statement's shared-session guard (its pg_locks look-up), to measure what
// the guard costs.
func BenchmarkSessionLockUnlockNoGuard(b *testing.B) { benchSessionLockUnlock(b, true) }

func benchSessionLockUnlock(b *testing.B, noGuard bool) {
	srv := sessServer(b)
	s := newSession(b, sessPool(b, srv.URL(), 4), pgstore.SessionOptions{})
	if noGuard {
		pgstore.WithoutSharedGuard(s)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.Acquire(ctx, "bench", "tok", time.Minute); err != nil {
			b.Fatal(err)
		}
		if err := s.Release(ctx, "bench", "tok"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRowLock(b *testing.B) {
	srv := sessServer(b)
	pool := sessPool(b, srv.URL(), 4)
	ctx := context.Background()
	nop := func(pgx.Tx) error { return nil }
	for b.Loop() {
		if err := pgstore.WithRowLock(ctx, pool, "bench", pgstore.RowLockOptions{}, nop); err != nil {
			b.Fatal(err)
		}
	}
}
