package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"example.com/dlock"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"
)

// BenchmarkRateLimiters compares one decision (Allow of one request) of
// dlock.Limiter on redisstore with go-redis/redis_rate v10 on the same
// Redis, in the same run, at 1 and 16 goroutines (each its own key, under a
// limit no call reaches, so every decision writes); x/time/rate is the
// in-process floor. Besides ns/op it reports the Redis commands per
// decision (cmds/op: script calls from INFO commandstats; dlock's calls
// made at once share round trips) and Redis CPU per decision (srv-µs/op,
// from INFO cpu). Read the ratios within one run.
//
//	cd bench && go test -run '^$' -bench BenchmarkRateLimiters -benchtime 30000x -count 3 .
func BenchmarkRateLimiters(b *testing.B) {
	srv := redisserver.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 32})
	b.Cleanup(func() { _ = rdb.Close() })
	st, err := redisstore.New(rdb, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	lim := dlock.RateLimit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000}
	dl, err := dlock.NewLimiter(st, lim)
	if err != nil {
		b.Fatal(err)
	}
	rr := redis_rate.NewLimiter(rdb)
	rrLimit := redis_rate.Limit{Rate: lim.Rate, Period: lim.Period, Burst: lim.Burst}
	ctx := context.Background()
	for _, g := range []int{1, 16} {
		gs := "/g=" + strconv.Itoa(g)
		b.Run("dlock"+gs, func(b *testing.B) {
			rateRun(b, rdb, g, func(key string) (bool, error) {
				r, err := dl.Allow(ctx, key)
				return r.Allowed == 1, err
			})
		})
		b.Run("redis_rate"+gs, func(b *testing.B) {
			rateRun(b, rdb, g, func(key string) (bool, error) {
				r, err := rr.Allow(ctx, key, rrLimit)
				return err == nil && r.Allowed == 1, err
			})
		})
		b.Run("xtime"+gs, func(b *testing.B) {
			var mu sync.Mutex
			local := map[string]*rate.Limiter{}
			rateRun(b, nil, g, func(key string) (bool, error) {
				mu.Lock()
				l := local[key]
				if l == nil {
					l = rate.NewLimiter(rate.Limit(lim.Rate), lim.Burst)
					local[key] = l
				}
				mu.Unlock()
				return l.Allow(), nil
			})
		})
	}
}

// rateRun runs decide on g goroutines, each with its own key, b.N times in
// all, and reports Redis's script calls and CPU per decision when rdb is
// set. Every decision must be an admission.
func rateRun(b *testing.B, rdb *redis.Client, g int, decide func(key string) (bool, error)) {
	ctx := context.Background()
	calls0, cpu0 := redisCounters(b, ctx, rdb)
	b.ReportAllocs()
	b.ResetTimer()
	var next, denied atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for i := range g {
		key := b.Name() + "-" + strconv.Itoa(i)
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				ok, err := decide(key)
				if err != nil {
					failed.Store(err)
					return
				}
				if !ok {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	if denied.Load() > 0 {
		b.Fatalf("%d decisions denied under a limit no call should reach", denied.Load())
	}
	if rdb != nil {
		calls1, cpu1 := redisCounters(b, ctx, rdb)
		b.ReportMetric(float64(calls1-calls0)/float64(b.N), "cmds/op")
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "srv-µs/op")
	}
}

// redisCounters returns the server's script calls (EVAL and EVALSHA, from
// INFO commandstats) and CPU so far; zero without rdb.
func redisCounters(b *testing.B, ctx context.Context, rdb *redis.Client) (int64, time.Duration) {
	if rdb == nil {
		return 0, 0
	}
	cpu, err := serverCPU(ctx, rdb)
	if err != nil {
		b.Fatal(err)
	}
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var calls int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name != "cmdstat_evalsha" && name != "cmdstat_eval" {
			continue
		}
		v, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		calls += n
	}
	return calls, cpu
}
