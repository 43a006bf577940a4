package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"
)

// BenchmarkPermitsCycle compares, at the store level on one server, a
// semaphore cycle (AcquirePermits + ReleasePermits, a permit of 8) with the
// mutex cycle (Acquire + Release) in the same run: read the ratio, not the
// absolute time. Each reports roundtrips/op (the go-redis calls, a
// pipeline counting once) and commands/op, counted by a client hook.
func BenchmarkPermitsCycle(b *testing.B) {
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
	for _, g := range []int{1, 16} {
		b.Run("Mutex/g="+strconv.Itoa(g), func(b *testing.B) {
			defer rc.report(b)()
			runParallel(b, g, func(key string) error {
				tok := floorToken()
				if _, err := st.Acquire(ctx, key, tok, 30*time.Second); err != nil {
					return err
				}
				return st.Release(ctx, key, tok)
			})
		})
		b.Run("Semaphore/g="+strconv.Itoa(g), func(b *testing.B) {
			defer rc.report(b)()
			runParallel(b, g, func(key string) error {
				tok := floorToken()
				if _, err := st.AcquirePermits(ctx, key, tok, 8, 1, 30*time.Second); err != nil {
					return err
				}
				return st.ReleasePermits(ctx, key, tok)
			})
		})
	}
}

// roundTripCounter is a go-redis hook counting round trips (one per
// command sent alone, one per pipeline) and the commands they carry.
type roundTripCounter struct{ trips, cmds atomic.Int64 }

func (c *roundTripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *roundTripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.trips.Add(1)
		c.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (c *roundTripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.trips.Add(1)
		c.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// report notes the counts now and returns a func that reports the
// counts since then per operation of b.
func (c *roundTripCounter) report(b *testing.B) func() {
	t0, c0 := c.trips.Load(), c.cmds.Load()
	return func() {
		if b.N == 0 {
			return
		}
		b.ReportMetric(float64(c.trips.Load()-t0)/float64(b.N), "roundtrips/op")
		b.ReportMetric(float64(c.cmds.Load()-c0)/float64(b.N), "commands/op")
	}
}

var _ redis.Hook = (*roundTripCounter)(nil)
