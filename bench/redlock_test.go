package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncpool "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redlock"
)

// TestRedlockVsRedsync compares an uncontended lock+unlock through dlock's
// Redlock store (dlock.Client over redlock.NewRedis, fencing on, the
// defaults but a 1 s node timeout) with redsync's (defaults), both over the same 5 redis-servers, each with
// clients of its own, at 1 and 16 goroutines (each goroutine on a key of its
// own). The libraries take turns in interleaved rounds of DLOCK_REDLOCK_TURN
// (default 1 s); it reports each round's ratio (dlock ÷ redsync, ops/s) and
// their median, and the round trips per lock+unlock (go-redis hook: every
// command, a pipeline once, over all 5 clients). It is slow, so it runs
// only with DLOCK_BENCH_REDLOCK=1:
//
//	cd bench && DLOCK_BENCH_REDLOCK=1 go test -run RedlockVsRedsync -v .
func TestRedlockVsRedsync(t *testing.T) {
	if os.Getenv("DLOCK_BENCH_REDLOCK") == "" {
		t.Skip("set DLOCK_BENCH_REDLOCK=1")
	}
	rounds, _ := strconv.Atoi(envOr("DLOCK_REDLOCK_ROUNDS", "5"))
	turn, err := time.ParseDuration(envOr("DLOCK_REDLOCK_TURN", "1s"))
	if err != nil {
		t.Fatal(err)
	}
	srvs := redisserver.StartN(t, 5)
	dl, dlTrips := redlockLib(t, srvs)
	rs, rsTrips := redsyncLib(t, srvs)
	libs := []struct {
		name  string
		cycle func(ctx context.Context, key string) error
		trips *atomic.Int64
	}{{"dlock", dl, dlTrips}, {"redsync", rs, rsTrips}}
	for _, g := range []int{1, 16} {
		var ratios []float64
		for r := range rounds {
			ops := map[string]float64{}
			trips := map[string]float64{}
			order := libs
			if r%2 == 1 {
				order = []struct {
					name  string
					cycle func(ctx context.Context, key string) error
					trips *atomic.Int64
				}{libs[1], libs[0]}
			}
			for _, l := range order {
				t0 := l.trips.Load()
				n := runCycles(t, l.cycle, l.name, g, turn)
				ops[l.name] = float64(n) / turn.Seconds()
				trips[l.name] = float64(l.trips.Load()-t0) / float64(n)
			}
			ratios = append(ratios, ops["dlock"]/ops["redsync"])
			t.Logf("g=%d round %d: dlock %.0f ops/s (%.2f round trips/op), redsync %.0f ops/s (%.2f); ratio %.2f",
				g, r, ops["dlock"], trips["dlock"], ops["redsync"], trips["redsync"], ratios[len(ratios)-1])
		}
		slices.Sort(ratios)
		t.Logf("g=%d: dlock ÷ redsync median %.2f× (%.2f–%.2f) over %d rounds", g, ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1], rounds)
	}
}

// runCycles runs cycle on g goroutines, each on its own key, for d, and
// returns the lock+unlock pairs done.
func runCycles(t *testing.T, cycle func(ctx context.Context, key string) error, name string, g int, d time.Duration) int64 {
	ctx := context.Background()
	var n atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for i := range g {
		key := fmt.Sprintf("rl:%s:%d", name, i)
		wg.Go(func() {
			for time.Now().Before(end) {
				if err := cycle(ctx, key); err != nil {
					t.Error(err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load()
}

// tripHook counts round trips: every command, a pipeline once.
type tripHook struct{ n *atomic.Int64 }

func (h tripHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}

func (h tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

func redlockLib(t *testing.T, srvs []*redisserver.Server) (func(context.Context, string) error, *atomic.Int64) {
	trips := new(atomic.Int64)
	var clients []redis.UniversalClient
	for _, s := range srvs {
		o := &redis.Options{Addr: s.Addr(), PoolSize: 32}
		redlock.ClientOptions(o)
		c := redis.NewClient(o)
		c.AddHook(tripHook{trips})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	// A node timeout of a second, not the default 50 ms: on a loaded
	// 2-core machine running 5 servers a release could miss 50 ms, which
	// measures the machine, not the library (redsync waits for go-redis's
	// 3 s timeouts).
	st, err := redlock.NewRedis(clients, "", &redlock.Options{NodeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c, err := dlock.New(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return func(ctx context.Context, key string) error {
		l, err := c.Lock(ctx, key)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}, trips
}

func redsyncLib(t *testing.T, srvs []*redisserver.Server) (func(context.Context, string) error, *atomic.Int64) {
	trips := new(atomic.Int64)
	var pools []redsyncpool.Pool
	for _, s := range srvs {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 32})
		c.AddHook(tripHook{trips})
		t.Cleanup(func() { _ = c.Close() })
		pools = append(pools, goredis.NewPool(c))
	}
	rs := redsync.New(pools...)
	return func(ctx context.Context, key string) error {
		m := rs.NewMutex(key)
		if err := m.LockContext(ctx); err != nil {
			return err
		}
		_, err := m.UnlockContext(ctx)
		return err
	}, trips
}
