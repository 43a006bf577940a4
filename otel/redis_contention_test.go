package dlockotel_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"

	"example.com/dlock"
	"example.com/dlock/internal/redisserver"
	dlockotel "example.com/dlock/otel"
	"example.com/dlock/redisstore"
)

// redisClient returns a dlock Client on a fresh Redis server, observed by
// o, and the server.
func redisClient(t *testing.T, o dlock.Observer, opts ...dlock.Option) (*dlock.Client, *redisserver.Server) {
	t.Helper()
	srv := redisserver.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rc.Close() })
	store, err := redisstore.New(rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(store, append([]dlock.Option{dlock.WithObserver(o)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c, srv
}

// Under contention on Redis (4 goroutines, each 20 Locks with a 5 ms wait
// bound and 20 TryLocks on one key), the wait histogram counts every call
// once: its acquired points are the calls that returned a lease, the
// others the calls that failed; the held counter ends at 0 and the hold
// histogram has a point per lease.
func TestContentionOnRedis(t *testing.T) {
	s := newSink()
	c, _ := redisClient(t, s.observer(t))
	ctx := context.Background()
	var mu sync.Mutex
	var acquired, failed int
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for i := 0; i < 40; i++ {
				var l *dlock.Lease
				var err error
				if i%2 == 0 {
					l, err = c.Lock(ctx, "hot", dlock.WithWait(5*time.Millisecond))
				} else {
					l, err = c.TryLock(ctx, "hot")
				}
				mu.Lock()
				if err != nil {
					failed++
				} else {
					acquired++
				}
				mu.Unlock()
				if err == nil {
					if err := l.Release(ctx); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	var gotAcquired, gotFailed uint64
	ms := s.metrics(t)
	for _, p := range ms[dlockotel.MetricWaitDuration] {
		if v, _ := p.attrs.Value(dlockotel.AttrOutcome); v.AsString() == "acquired" {
			gotAcquired += p.count
		} else {
			gotFailed += p.count
		}
	}
	t.Logf("%d acquired, %d failed", acquired, failed)
	if gotAcquired != uint64(acquired) || gotFailed != uint64(failed) {
		t.Fatalf("wait histogram: %d acquired and %d failed, the calls: %d and %d\n%s",
			gotAcquired, gotFailed, acquired, failed, dumpMetrics(ms))
	}
	lock := dlockotel.AttrKind.String("lock")
	if p := find(t, ms, dlockotel.MetricHeld, lock); p.value != 0 {
		t.Errorf("dlock.held after every release = %g", p.value)
	}
	if p := find(t, ms, dlockotel.MetricHoldDuration, lock); p.count != uint64(acquired) {
		t.Errorf("hold histogram: %d points, %d leases", p.count, acquired)
	}
}

// A lease on a Redis server that is killed is lost with cause expired: the
// loss counter, the failed renewals, the held counter back at 0, and the
// Lock's call span ended in error.
func TestStoreKilledLossOnRedis(t *testing.T) {
	s := newSink()
	c, srv := redisClient(t, s.observer(t), dlock.WithAutoRenew(300*time.Millisecond))
	l, err := c.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease outlived its server by 10 s")
	}
	lock := dlockotel.AttrKind.String("lock")
	deadline := time.Now().Add(5 * time.Second) // the loss's event follows Done
	for s.metrics(t)[dlockotel.MetricLost] == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ms := s.metrics(t)
	if p := find(t, ms, dlockotel.MetricLost, lock, dlockotel.AttrCause.String("expired")); p.value != 1 {
		t.Errorf("losses (expired): %g, want 1", p.value)
	}
	if p := find(t, ms, dlockotel.MetricRenewFailures, lock); p.value < 1 {
		t.Errorf("renewal failures: %g, want at least 1", p.value)
	}
	if p := find(t, ms, dlockotel.MetricHeld, lock); p.value != 0 {
		t.Errorf("dlock.held after the loss = %g", p.value)
	}
	lost := s.span(t, "dlock.Lock", dlockotel.AttrEnd, "lost")
	if attr(lost, dlockotel.AttrCause) != "expired" || lost.Status().Code != codes.Error {
		t.Errorf("lost lock's call span: cause %q, status %v; want expired, Error", attr(lost, dlockotel.AttrCause), lost.Status())
	}
}
