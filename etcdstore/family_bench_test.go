package etcdstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"example.com/dlock/etcdstore"
)

// Uncontended cycles of the lock family on one node, each two
// transactions (acquire, release): a permit of a semaphore, a read and a
// write holding of a read-write lock. Each cycle uses a new token (and so
// a new etcd key name), as every acquisition does. Each reports
// requests/op, the gRPC unary calls the client made in the loop (each one
// round trip). Run with
// go test -run '^$' -bench FamilyUncontended -benchtime 1000x .
func BenchmarkFamilyUncontended(b *testing.B) {
	c := node(b)
	var calls atomic.Int64
	count := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		calls.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	store := func(b *testing.B) *etcdstore.Store {
		cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second,
			Logger: zap.NewNop(), DialOptions: []grpc.DialOption{count}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cli.Close() })
		s, err := etcdstore.New(cli, etcdstore.Options{Prefix: uniq(b)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close(context.Background()) })
		return s
	}
	cycle := func(b *testing.B, acquire func(tk string) error, release func(tk string) error) {
		if err := acquire("warm"); err != nil { // starts the session
			b.Fatal(err)
		}
		if err := release("warm"); err != nil {
			b.Fatal(err)
		}
		before := calls.Load()
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
		b.ReportMetric(float64(calls.Load()-before)/float64(b.N), "requests/op")
	}
	b.Run("permit", func(b *testing.B) {
		s := store(b)
		ctx := ctxT(b, 5*time.Minute)
		cycle(b, func(tk string) error { _, err := s.AcquirePermits(ctx, "k", tk, 3, 1, time.Second); return err },
			func(tk string) error { return s.ReleasePermits(ctx, "k", tk) })
	})
	b.Run("read", func(b *testing.B) {
		s := store(b)
		ctx := ctxT(b, 5*time.Minute)
		cycle(b, func(tk string) error { _, err := s.AcquireRead(ctx, "k", tk, time.Second); return err },
			func(tk string) error { return s.ReleaseRW(ctx, "k", tk) })
	})
	b.Run("write", func(b *testing.B) {
		s := store(b)
		ctx := ctxT(b, 5*time.Minute)
		cycle(b, func(tk string) error { _, err := s.AcquireWrite(ctx, "k", tk, time.Second); return err },
			func(tk string) error { return s.ReleaseRW(ctx, "k", tk) })
	})
}
