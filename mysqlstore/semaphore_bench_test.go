package mysqlstore_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/mysqlstore"
)

// benchDelay is the latency the proxy adds to every request (each chunk
// the client sends) in the round-trip benchmarks: time per cycle divided
// by it estimates the round trips per cycle (the server's own time is well
// under it).
const benchDelay = 25 * time.Millisecond

// BenchmarkPermitsCycle runs uncontended cycles on one key of the shared
// server with interpolateParams=true (as the URL opener sets): the mutex's
// (Acquire + Release) and the Semaphore's (AcquirePermits +
// ReleasePermits, one permit of 8), direct (read the ratio, not the
// absolute time), then through a proxy that delays every request by 25 ms,
// where it reports round trips per cycle (roundtrips/op).
func BenchmarkPermitsCycle(b *testing.B) {
	cycles := map[string]func(s *mysqlstore.Store, ctx context.Context) error{
		"Mutex": func(s *mysqlstore.Store, ctx context.Context) error {
			if _, err := s.Acquire(ctx, "bench", "tok", time.Minute); err != nil {
				return err
			}
			return s.Release(ctx, "bench", "tok")
		},
		"Semaphore": func(s *mysqlstore.Store, ctx context.Context) error {
			if _, err := s.AcquirePermits(ctx, "bench", "tok", 8, 1, time.Minute); err != nil {
				return err
			}
			return s.ReleasePermits(ctx, "bench", "tok")
		},
	}
	_, opts := migrated(b, mysqlstore.Options{})
	for _, delayed := range []bool{false, true} {
		for _, name := range []string{"Mutex", "Semaphore"} {
			sub := name
			if delayed {
				sub += "/rtt=25ms"
			}
			b.Run(sub, func(b *testing.B) {
				addr := shared(b).Addr()
				if delayed {
					p, err := faultproxy.New(addr)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = p.Close() })
					p.SetDelay(faultproxy.Upstream, benchDelay)
					addr = p.Addr()
				}
				s, err := mysqlstore.New(openDB(b, mysqlserver.DSNFor(addr, mysqlserver.Database, "interpolateParams=true")), opts)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				if err := cycles[name](s, ctx); err != nil { // prepares Acquire's statement
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
