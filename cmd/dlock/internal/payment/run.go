package payment

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// The strategies, in the order the demo runs them.
const (
	NoGuard       = "noguard"         // no guard: both clicks charge
	NoGuardRetry  = "noguard-retry"   // no guard, the instance dies after charging, the client retries: two charges
	Guarded       = "guard"           // idemhttp on a dlock.Guard: one charge
	GuardCrash    = "guard-crash"     // the executor dies after charging; the retry takes over: one charge
	GuardFenceKey = "guard-fence-key" // guard-crash with the charge keyed by the fence: two (negative control)
)

// Strategies lists every strategy, in order.
var Strategies = []string{NoGuard, NoGuardRetry, Guarded, GuardCrash, GuardFenceKey}

// crashes reports whether strategy kills the executor mid-payment.
func crashes(strategy string) bool {
	return strategy == NoGuardRetry || strategy == GuardCrash || strategy == GuardFenceKey
}

// Config is a run of the scenario.
type Config struct {
	// RedisAddr is the Redis the instances share (host:port).
	RedisAddr string
	// Orders per strategy; Instances of the service (at least 2).
	Orders, Instances int
	// Lease is the guard's lease on the instance that dies: how soon the
	// retry takes over (the other instances use steadyLease). Latency is
	// the provider's time per charge.
	Lease, Latency time.Duration
}

// Defaults of Config.
const (
	DefaultOrders  = 20
	DefaultLease   = 300 * time.Millisecond
	DefaultLatency = 20 * time.Millisecond
)

// steadyLease is the guard's lease on the instances that do not die:
// long enough that a renewal delayed on a loaded machine loses nothing.
const steadyLease = 10 * time.Second

// Run runs each strategy on fresh instances and returns what the
// provider charged. It returns an error, with the results so far, if an
// instance cannot start or the doomed instance does not charge in time.
func Run(ctx context.Context, cfg Config, strategies []string) ([]Result, error) {
	if cfg.Instances < 2 || cfg.Orders < 1 {
		return nil, fmt.Errorf("payment: %d instances, %d orders: want at least 2 and 1", cfg.Instances, cfg.Orders)
	}
	run := make([]byte, 4)
	_, _ = rand.Read(run)
	var out []Result
	for _, s := range strategies {
		if !slices.Contains(Strategies, s) {
			return out, fmt.Errorf("payment: unknown strategy %q (want some of %s)", s, strings.Join(Strategies, ","))
		}
		r, err := runStrategy(ctx, cfg, s, hex.EncodeToString(run))
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func runStrategy(ctx context.Context, cfg Config, strategy, run string) (Result, error) {
	p := NewProvider(cfg.Latency)
	charged := make(chan string, cfg.Orders)
	insts, err := startInstances(cfg, strategy, run, p, charged)
	defer func() {
		for _, in := range insts {
			in.stop()
		}
	}()
	if err != nil {
		return Result{}, err
	}
	c := &client{http: &http.Client{Timeout: 30 * time.Second}, strategy: strategy, t: &tally{}}
	defer c.http.CloseIdleConnections()
	orders := make([]string, cfg.Orders)
	for i := range orders {
		orders[i] = fmt.Sprintf("order-%04d", i+1)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i, o := range orders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if crashes(strategy) { // to instance-1, which dies; then the next
				c.pay(ctx, o, urls(insts, 0))
				return
			}
			var clicks sync.WaitGroup // the double click: two instances behind a balancer
			for k := range 2 {
				clicks.Add(1)
				go func() { defer clicks.Done(); c.pay(ctx, o, urls(insts, i+k)) }()
			}
			clicks.Wait()
		}()
	}
	if crashes(strategy) {
		err = killAfterCharges(ctx, insts[0], charged, cfg.Orders)
	}
	wg.Wait()
	r := summarise(strategy, orders, p, c.t, time.Since(start))
	for _, in := range insts {
		r.Takeovers += int(in.takeovers.Load())
	}
	r.judge()
	return r, err
}

// startInstances starts the strategy's instances on provider p; in the
// strategies that crash, the first one is to die: short lease, and each
// request hangs after its charge, said on charged. It returns those it
// started, and the error that stopped it.
func startInstances(cfg Config, strategy, run string, p *Provider, charged chan<- string) ([]*instance, error) {
	var insts []*instance
	for i := range cfg.Instances {
		ic := instanceConfig{name: fmt.Sprintf("instance-%d", i+1), redisAddr: cfg.RedisAddr,
			prefix: "dlock-demo:pay:" + run + ":" + strategy + ":", lease: steadyLease, provider: p}
		if i == 0 && crashes(strategy) { // the instance that dies
			ic.lease = cfg.Lease
			ic.hang = func(ctx context.Context, order string) {
				select { // an order charged again (its lease lapsed before the kill) is not counted twice
				case charged <- order:
				default:
				}
				<-ctx.Done()
			}
		}
		in, err := startInstance(ic)
		if err != nil {
			return insts, err
		}
		insts = append(insts, in)
	}
	return insts, nil
}

// killAfterCharges waits (at most 30 s) until the doomed instance has
// charged n orders, then kills it.
func killAfterCharges(ctx context.Context, doomed *instance, charged <-chan string, n int) error {
	defer doomed.kill()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	for range n {
		select {
		case <-charged:
		case <-t.C:
			return errNoCharge
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// urls lists the instances' URLs starting at the i-th (mod their number).
func urls(insts []*instance, i int) []string {
	var out []string
	for k := range insts {
		out = append(out, insts[(i+k)%len(insts)].url)
	}
	return out
}
