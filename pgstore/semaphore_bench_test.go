package pgstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/internal/sqltest"
	"example.com/dlock/pgstore"
)

// BenchmarkPermitsCycle: the SQL stores' permits cycle benchmark
// (sqltest.BenchPermitsCycle) on the shared server.
func BenchmarkPermitsCycle(b *testing.B) {
	sqltest.BenchPermitsCycle(b, server(b).Addr(), func(b *testing.B, addr string) sqltest.PermitStore {
		return newStore(b, newPool(b, addr), pgstore.Options{})
	})
}

// BenchmarkPermitsCycleParallel runs the two cycles of BenchmarkPermitsCycle
// from 16 goroutines at once, each on a key of its own (no contention for
// a key; the commits of the Semaphore's releases, which all send NOTIFY,
// take the notification queue's lock in turn).
func BenchmarkPermitsCycleParallel(b *testing.B) {
	for _, name := range []string{"Mutex", "Semaphore"} {
		b.Run(name, func(b *testing.B) {
			pool := newPool(b)
			s := newStore(b, pool, pgstore.Options{})
			ctx := context.Background()
			var next atomic.Int64
			b.SetParallelism(8) // 16 goroutines on the 2 cores of the test machine
			b.RunParallel(func(pb *testing.PB) {
				key := "bench" + strconv.FormatInt(next.Add(1), 10)
				for pb.Next() {
					var err error
					if name == "Mutex" {
						if _, err = s.Acquire(ctx, key, "tok", time.Minute); err == nil {
							err = s.Release(ctx, key, "tok")
						}
					} else if _, err = s.AcquirePermits(ctx, key, "tok", 8, 1, time.Minute); err == nil {
						err = s.ReleasePermits(ctx, key, "tok")
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
