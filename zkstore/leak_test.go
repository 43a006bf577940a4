package zkstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/zkstore"
	"go.uber.org/goleak"
)

// A store's calls leave no goroutine behind once its conn is closed: a
// cancelled queued wait, a dlock Lease renewed and released, a cancelled
// Acquire, a Close (go-zookeeper's own goroutines end with the conn).
func TestNoGoroutineLeft(t *testing.T) {
	e := server(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := zkstore.Dial(ctx, e.Addrs(), zkstore.Options{Root: uniq(t), SessionTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := s.AcquireQueued(wctx, "k", tok(), 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued wait: %v", err)
	}
	wcancel()
	gone, gcancel := context.WithCancel(ctx)
	gcancel()
	if _, err := s.Acquire(gone, "k2", tok(), 0); err == nil {
		t.Fatal("Acquire with a cancelled context succeeded")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
