package pgstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/pgstore"
)

// benchDelay is the latency the proxy adds to every request (each chunk the client sends) in the
// round-trip benchmarks: time per cycle divided by it is the round trips
// per cycle (the server's own time is well under it).
const benchDelay = 25 * time.Millisecond

// BenchmarkPermitsCycle runs uncontended cycles on one key of the shared
// server: the mutex's (Acquire + Release) and the Semaphore's
// (AcquirePermits + ReleasePermits, one permit of 8), direct (read the
// ratio, not the absolute time), then through a proxy that delays every
// request by 25 ms, where it reports round trips per cycle (roundtrips/op).
func BenchmarkPermitsCycle(b *testing.B) {
	cycles := map[string]func(s *pgstore.Store, ctx context.Context) error{
		"Mutex": func(s *pgstore.Store, ctx context.Context) error {
			if _, err := s.Acquire(ctx, "bench", "tok", time.Minute); err != nil {
				return err
			}
			return s.Release(ctx, "bench", "tok")
		},
		"Semaphore": func(s *pgstore.Store, ctx context.Context) error {
			if _, err := s.AcquirePermits(ctx, "bench", "tok", 8, 1, time.Minute); err != nil {
				return err
			}
			return s.ReleasePermits(ctx, "bench", "tok")
		},
	}
	for _, delayed := range []bool{false, true} {
		for _, name := range []string{"Mutex", "Semaphore"} {
			sub := name
			if delayed {
				sub += "/rtt=25ms"
			}
			b.Run(sub, func(b *testing.B) {
				var addr []string
				if delayed {
					p, err := faultproxy.New(server(b).Addr())
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = p.Close() })
					p.SetDelay(faultproxy.Upstream, benchDelay)
					addr = append(addr, p.Addr())
				}
				s := newStore(b, newPool(b, addr...), pgstore.Options{})
				ctx := context.Background()
				if err := cycles[name](s, ctx); err != nil { // prepares the statements
					b.Fatal(err)
				}
				start := time.Now()
				n := 0
				for b.Loop() {
					if err := cycles[name](s, ctx); err != nil {
						b.Fatal(err)
					}
					n++
				}
				if delayed {
					b.ReportMetric(float64(time.Since(start))/float64(n)/float64(benchDelay), "roundtrips/op")
				}
			})
		}
	}
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
