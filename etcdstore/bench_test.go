package etcdstore_test

import (
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// Uncontended lock+unlock on one node: this store (Acquire + Release, two
// transactions; a keepalive every half session TTL at most) against etcd's
// concurrency.Mutex (Lock: one transaction; Unlock: one delete) on a
// session made once, as a user would. Run with
// go test -run '^$' -bench Uncontended -benchtime 2000x .
func BenchmarkUncontended(b *testing.B) {
	c := node(b)
	b.Run("etcdstore", func(b *testing.B) {
		s, _ := newStore(b, c, uniq(b), 0)
		ctx := ctxT(b, time.Minute)
		a := tok()
		b.ResetTimer()
		for range b.N {
			if _, err := s.Acquire(ctx, "k", a, time.Second); err != nil {
				b.Fatal(err)
			}
			if err := s.Release(ctx, "k", a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dlock.Client", func(b *testing.B) {
		s, _ := newStore(b, c, uniq(b), 0)
		dc, err := dlock.New(s)
		if err != nil {
			b.Fatal(err)
		}
		faulttest.CloseOnCleanup(b, dc)
		ctx := ctxT(b, time.Minute)
		b.ResetTimer()
		for range b.N {
			l, err := dc.Lock(ctx, "k")
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("concurrency.Mutex", func(b *testing.B) {
		cli := c.Client(b)
		sess, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
		if err != nil {
			b.Fatal(err)
		}
		defer sess.Close()
		m := concurrency.NewMutex(sess, uniq(b)+"k")
		ctx := ctxT(b, time.Minute)
		b.ResetTimer()
		for range b.N {
			if err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
