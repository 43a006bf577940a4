package redisstore_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"

	"github.com/redis/go-redis/v9"
)

// BenchmarkRWLockMix is the read-write lock's throughput target: 16
// goroutines on one key, 90 % reads, each holding the key 1 ms, through the
// user API on one Redis server (DLOCK_BENCH_HOLD sets another hold time): the mutex (dlock.Client, every operation
// exclusive) and the read-write lock (dlock.RWLocks, reads overlap) in the
// same run. Compare their ops/s; roundtrips/op and commands/op count the
// store's requests (a pipeline is one round trip; notifications are not
// counted):
//
//	go test -run '^$' -bench RWLockMix -benchtime 3s ./redisstore
func BenchmarkRWLockMix(b *testing.B) {
	srv := redisserver.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 32})
	var rc roundTripCounter
	rdb.AddHook(&rc)
	b.Cleanup(func() { _ = rdb.Close() })
	st, err := redisstore.New(rdb, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	const g = 16
	hold := time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("DLOCK_BENCH_HOLD")); err == nil {
		hold = d
	}
	mix := func(b *testing.B, read, write func() (func() error, error)) {
		var op atomic.Int64
		defer rc.report(b)()
		runParallel(b, g, func(string) error {
			take := read
			if op.Add(1)%10 == 0 {
				take = write
			}
			release, err := take()
			if err != nil {
				return err
			}
			time.Sleep(hold)
			return release()
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	}
	b.Run("Mutex", func(b *testing.B) {
		c, err := dlock.New(st)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close(ctx) })
		lock := func() (func() error, error) {
			l, err := c.Lock(ctx, "bench-rw-mutex")
			if err != nil {
				return nil, err
			}
			return func() error { return l.Release(ctx) }, nil
		}
		mix(b, lock, lock)
	})
	b.Run("RWLock", func(b *testing.B) {
		l, err := dlock.NewRWLocks(st)
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
