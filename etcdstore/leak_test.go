package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/etcdstore"
	"example.com/dlock/internal/faulttest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// A store's calls leave no goroutine behind: a cancelled queued wait, a
// dlock Lease renewed and released, a Close; only the etcd client's own
// goroutines remain until it is closed.
func TestNoGoroutineLeft(t *testing.T) {
	c := node(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s, err := etcdstore.New(cli, etcdstore.Options{Prefix: uniq(t), SessionTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dc, err := dlock.New(s, dlock.WithAutoRenew(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, dc)
	l, err := dc.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 1500*time.Millisecond) // past one renewal
	if _, err := s.AcquireQueued(wctx, "k", tok(), time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued wait: %v", err)
	}
	wcancel()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
