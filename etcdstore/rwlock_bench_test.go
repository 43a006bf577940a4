package etcdstore_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
)

// BenchmarkRWLockMix is redisstore's BenchmarkRWLockMix on one etcd node:
// 16 goroutines on one key, 90 % reads, each holding the key 1 ms
// (DLOCK_BENCH_HOLD sets another hold time), through the user API: the
// mutex (dlock.Client, every operation exclusive) and the read-write lock
// (dlock.RWLocks, reads overlap) in the same run. Compare their ops/s;
// txn/op, get/op, put/op, lease/op and watches/op count the requests
// (requestCounter):
//
//	go test -run '^$' -bench RWLockMix -benchtime 2s ./etcdstore
func BenchmarkRWLockMix(b *testing.B) {
	c := node(b)
	ctx := ctxT(b, time.Hour)
	hold := time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("DLOCK_BENCH_HOLD")); err == nil {
		hold = d
	}
	var rc requestCounter
	mix := func(b *testing.B, read, write func() (func() error, error)) {
		var op atomic.Int64
		defer rc.report(b)()
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		b.ResetTimer()
		for range 16 {
			wg.Go(func() {
				for n := op.Add(1); n <= int64(b.N); n = op.Add(1) {
					take := read
					if n%10 == 0 {
						take = write
					}
					release, err := take()
					if err == nil {
						time.Sleep(hold) // the section's work, not synchronisation
						err = release()
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	}
	b.Run("Mutex", func(b *testing.B) {
		s := countedStore(b, c, &rc)
		dc, err := dlock.New(s)
		if err != nil {
			b.Fatal(err)
		}
		faulttest.CloseOnCleanup(b, dc)
		lock := func() (func() error, error) {
			l, err := dc.Lock(ctx, "bench-rw-mutex")
			if err != nil {
				return nil, err
			}
			return func() error { return l.Release(ctx) }, nil
		}
		mix(b, lock, lock)
	})
	b.Run("RWLock", func(b *testing.B) {
		s := countedStore(b, c, &rc)
		l, err := dlock.NewRWLocks(s)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Close(ctx) })
		take := func(lock func(context.Context, string, ...dlock.Option) (*dlock.RWHolding, error)) func() (func() error, error) {
			return func() (func() error, error) {
				h, err := lock(ctx, "bench-rw")
				if err != nil {
					return nil, err
				}
				return func() error { return h.Release(ctx) }, nil
			}
		}
		mix(b, take(l.RLock), take(l.Lock))
	})
}
