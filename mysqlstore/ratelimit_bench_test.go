package mysqlstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/sqltest"
	"example.com/dlock/mysqlstore"
)

// benchLimits are the decisions the rate benchmarks time: one admitted
// every call (a million a second, far above the calls' pace) and one
// denied every call (one an hour, its burst of one used by the warm-up).
var benchLimits = map[string]driver.RateLimit{
	"Admitted": {Rate: 1_000_000, Period: time.Second, Burst: 1_000_000},
	"Denied":   {Rate: 1, Period: time.Hour, Burst: 1},
}

// BenchmarkRateDecision times AllowN on one key of the shared server with
// interpolateParams=true (as the URL opener sets), admitted and denied,
// direct (read the ratio to BenchmarkPermitsCycle's Mutex, not the
// absolute time), then through a proxy that delays every request by 25
// ms, where it reports round trips per decision (roundtrips/op: the
// proxy's count of turns, the sweep's included); the
// last, with go-sql-driver's default (no interpolateParams), counts the
// prepare too.
func BenchmarkRateDecision(b *testing.B) {
	_, opts := migrated(b, mysqlstore.Options{})
	runs := []struct {
		sub, name string
		delayed   bool
		params    string
	}{
		{"Admitted", "Admitted", false, "interpolateParams=true"},
		{"Denied", "Denied", false, "interpolateParams=true"},
		{"Admitted/rtt=25ms", "Admitted", true, "interpolateParams=true"},
		{"Denied/rtt=25ms", "Denied", true, "interpolateParams=true"},
		{"Admitted/rtt=25ms/prepare", "Admitted", true, ""},
	}
	for _, run := range runs {
		b.Run(run.sub, func(b *testing.B) {
			sub, name, delayed, params := run.sub, run.name, run.delayed, run.params
			addr := shared(b).Addr()
			var p *faultproxy.Proxy
			if delayed {
				var err error
				if p, err = faultproxy.New(addr); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = p.Close() })
				p.SetDelay(faultproxy.Upstream, sqltest.BenchDelay)
				addr = p.Addr()
			}
			s, err := mysqlstore.New(openDB(b, mysqlserver.DSNFor(addr, mysqlserver.Database, params)), opts)
			if err != nil {
				b.Fatal(err)
			}
			key := "bench-" + sub
			ctx, lim := context.Background(), benchLimits[name]
			if _, err := s.AllowN(ctx, key, lim, 1); err != nil { // opens the connection
				b.Fatal(err)
			}
			var turns0 int64
			if p != nil {
				turns0 = p.Turns()
			}
			n := 0
			for b.Loop() {
				r, err := s.AllowN(ctx, key, lim, 1)
				if err != nil || (r.Allowed == 1) != (name == "Admitted") {
					b.Fatalf("%+v, %v", r, err)
				}
				n++
			}
			if p != nil {
				b.ReportMetric(float64(p.Turns()-turns0)/float64(n), "roundtrips/op")
			}
		})
	}
}

// BenchmarkRateDecisionParallel runs admitted decisions from 16
// goroutines at once, each on a key of its own.
func BenchmarkRateDecisionParallel(b *testing.B) {
	_, opts := migrated(b, mysqlstore.Options{})
	s, err := mysqlstore.New(openDB(b, shared(b).DSN("interpolateParams=true")), opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, lim := context.Background(), benchLimits["Admitted"]
	var next atomic.Int64
	b.SetParallelism(8) // 16 goroutines on the 2 cores of the test machine
	b.RunParallel(func(pb *testing.PB) {
		key := "bench" + strconv.FormatInt(next.Add(1), 10)
		for pb.Next() {
			if r, err := s.AllowN(ctx, key, lim, 1); err != nil || r.Allowed != 1 {
				b.Errorf("%+v, %v", r, err)
				return
			}
		}
	})
}
