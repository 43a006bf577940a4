// Package ratedemo is `dlock demo --scenario rate-limit`: Redisson's
// RRateLimiter example (trySetRate(OVERALL, 5, 1, SECONDS), then
// tryAcquire on 10 threads: only 5 get a token) on several instances that
// share one Redis-protocol server, by strategy, with the instances'
// clocks in agreement or skewed.
package ratedemo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The strategies, in the order the demo runs them.
const (
	Local       = "local"        // x/time/rate in each instance: a budget per instance
	Shared      = "dlock"        // dlock.Limiter on the shared store: one budget
	SharedSkew  = "dlock-skewed" // the same, the instances' clocks skewed: one budget
	ClientClock = "client-clock" // a fixed window in Redis on each instance's skewed clock (negative control)
)

// Strategies lists every strategy, in order.
var Strategies = []string{Local, Shared, SharedSkew, ClientClock}

// skewed reports whether the strategy runs with the instances' clocks skewed.
func skewed(strategy string) bool { return strategy == SharedSkew || strategy == ClientClock }

// The limit of the seed's example: 5 tokens a second, all 5 at once.
const (
	Rate   = 5
	Period = time.Second
)

// Defaults of Config.
const (
	DefaultThreads = 10
	DefaultSkew    = 2 * time.Second
)

// Config is a run of the scenario.
type Config struct {
	// RedisAddr is the server the instances share (host:port).
	RedisAddr string
	// Instances (at least 2), each with Threads goroutines that call
	// tryAcquire once, all released together.
	Instances, Threads int
	// Skew is how far the skewed strategies move the instances' clocks:
	// instance i is off by Skew·(2i−(n−1))/(n−1), from −Skew to +Skew.
	Skew time.Duration
}

// Run runs each strategy on fresh instances and keys and returns what
// each admitted. It returns an error, with the results so far, if an
// instance cannot reach the server or a strategy is unknown.
func Run(ctx context.Context, cfg Config, strategies []string) ([]Result, error) {
	if cfg.Instances < 2 || cfg.Threads < 1 {
		return nil, fmt.Errorf("ratedemo: %d instances, %d threads: want at least 2 and 1", cfg.Instances, cfg.Threads)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	run := hex.EncodeToString(b)
	var out []Result
	for _, s := range strategies {
		if !slices.Contains(Strategies, s) {
			return out, fmt.Errorf("ratedemo: unknown strategy %q (want some of %s)", s, strings.Join(Strategies, ","))
		}
		r, err := runStrategy(ctx, cfg, s, "dlock-demo:rate:"+run+":"+s+":")
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// offset is instance i's clock offset under strategy.
func offset(cfg Config, strategy string, i int) time.Duration {
	if !skewed(strategy) {
		return 0
	}
	return cfg.Skew * time.Duration(2*i-(cfg.Instances-1)) / time.Duration(cfg.Instances-1)
}

func runStrategy(ctx context.Context, cfg Config, strategy, prefix string) (Result, error) {
	var insts []*instance
	defer func() {
		for _, in := range insts {
			in.close()
		}
	}()
	for i := range cfg.Instances {
		in, err := newInstance(ctx, cfg.RedisAddr, strategy, prefix, offset(cfg, strategy, i))
		if err != nil {
			return Result{}, err
		}
		insts = append(insts, in)
	}
	admitted := make([]int, cfg.Instances)
	errs := make([]error, cfg.Instances*cfg.Threads)
	var mu sync.Mutex
	var wg sync.WaitGroup
	release := make(chan struct{})
	for i, in := range insts {
		for k := range cfg.Threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-release
				ok, err := in.tryAcquire(ctx)
				mu.Lock()
				defer mu.Unlock()
				errs[i*cfg.Threads+k] = err
				if ok {
					admitted[i]++
				}
			}()
		}
	}
	start := time.Now()
	close(release)
	wg.Wait()
	return summarise(strategy, cfg, insts, admitted, errs, time.Since(start)), nil
}

// instance is one process's limiter: its own connection and clock.
type instance struct {
	rdb    *redis.Client
	offset time.Duration
	try    func(ctx context.Context) (bool, error)
}

func (in *instance) tryAcquire(ctx context.Context) (bool, error) { return in.try(ctx) }

func (in *instance) close() { _ = in.rdb.Close() }

// now is the instance's clock: the machine's, moved by its offset.
func (in *instance) now() time.Time { return time.Now().Add(in.offset) }

func newInstance(ctx context.Context, addr, strategy, prefix string, off time.Duration) (*instance, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 32})
	in := &instance{rdb: rdb, offset: off}
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("ratedemo: %s: %w", addr, err)
	}
	var err error
	switch strategy {
	case Local:
		in.try = localLimiter()
	case Shared, SharedSkew:
		in.try, err = sharedLimiter(rdb, prefix)
	case ClientClock:
		in.try = fixedWindow(rdb, prefix, in.now)
	}
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return in, nil
}
