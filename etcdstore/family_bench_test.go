package etcdstore_test

import (
	"testing"
	"time"
)

// Uncontended cycles of the lock family on one node, each two
// transactions (acquire, release): a permit of a semaphore, a read and a
// write holding of a read-write lock. Each cycle uses a new token (and so
// a new etcd key name), as every acquisition does. Run with
// go test -run '^$' -bench FamilyUncontended -benchtime 1000x .
func BenchmarkFamilyUncontended(b *testing.B) {
	c := node(b)
	cycle := func(b *testing.B, acquire func(tk string) error, release func(tk string) error) {
		b.ResetTimer()
		for range b.N {
			tk := tok()
			if err := acquire(tk); err != nil {
				b.Fatal(err)
			}
			if err := release(tk); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("permit", func(b *testing.B) {
		s, _ := newStore(b, c, uniq(b), 0)
		ctx := ctxT(b, 5*time.Minute)
		cycle(b, func(tk string) error { _, err := s.AcquirePermits(ctx, "k", tk, 3, 1, time.Second); return err },
			func(tk string) error { return s.ReleasePermits(ctx, "k", tk) })
	})
	b.Run("read", func(b *testing.B) {
		s, _ := newStore(b, c, uniq(b), 0)
		ctx := ctxT(b, 5*time.Minute)
		cycle(b, func(tk string) error { _, err := s.AcquireRead(ctx, "k", tk, time.Second); return err },
			func(tk string) error { return s.ReleaseRW(ctx, "k", tk) })
	})
	b.Run("write", func(b *testing.B) {
		s, _ := newStore(b, c, uniq(b), 0)
		ctx := ctxT(b, 5*time.Minute)
		cycle(b, func(tk string) error { _, err := s.AcquireWrite(ctx, "k", tk, time.Second); return err },
			func(tk string) error { return s.ReleaseRW(ctx, "k", tk) })
	})
}
