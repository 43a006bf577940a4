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

// TestPermitRoundTrips: an uncontended AcquirePermits + ReleasePermits on a
// key with no other holding is 2 gRPC calls (a transaction each, one round
// trip each); beside another holding the acquisition is 2 (the first
// transaction reads the holdings instead of putting, a second puts only if
// none was created since), so 3 in all. A refused acquisition is 1. The
// second case is the control: the counter sees the extra transaction.
func TestPermitRoundTrips(t *testing.T) {
	var calls atomic.Int64
	count := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		calls.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: node(t).Endpoints(), DialTimeout: 5 * time.Second,
		Logger: zap.NewNop(), DialOptions: []grpc.DialOption{count}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	s, err := etcdstore.New(cli, etcdstore.Options{Prefix: uniq(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	ctx := ctxT(t, time.Minute)
	check := func(what string, want int64, f func() error) {
		t.Helper()
		n0 := calls.Load()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := calls.Load() - n0; got != want {
			t.Fatalf("%s: %d calls, want %d", what, got, want)
		}
	}
	cycle := func() error {
		tk := tok()
		if _, err := s.AcquirePermits(ctx, "k", tk, 2, 1, time.Second); err != nil {
			return err
		}
		return s.ReleasePermits(ctx, "k", tk)
	}
	if err := cycle(); err != nil { // starts the session
		t.Fatal(err)
	}
	check("acquire+release", 2, cycle)
	if _, err := s.AcquirePermits(ctx, "k", tok(), 2, 1, time.Second); err != nil {
		t.Fatal(err)
	}
	check("control: acquire+release beside another holding", 3, cycle)
	if _, err := s.AcquirePermits(ctx, "k", tok(), 2, 1, time.Second); err != nil {
		t.Fatal(err)
	}
	check("refused acquire", 1, func() error {
		if _, err := s.AcquirePermits(ctx, "k", tok(), 2, 1, time.Second); err == nil {
			t.Fatal("a third permit of 2 was granted")
		}
		return nil
	})
}
