package chaos_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"example.com/dlock/internal/chaos/check"
	"example.com/dlock/internal/chaos/history"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/redisserver"
)

const (
	lockKey = "ProductStock_10000"
	resKey  = "stock:ProductStock_10000"
)

// stockRun describes one run of the inventory scenario over app processes.
type stockRun struct {
	Procs, Workers int
	Stock          int64
	TTL, Run       time.Duration
	Mode           string // "fenced", "unfenced" or "nolock"
	Store          string // "" (real), "nocheck"
	Seed           uint64
	ServerOpts     []redisserver.Option
	// Nemesis, if set, injects faults until ctx ends (when the apps are
	// done) and returns how many it injected.
	Nemesis func(ctx context.Context, e *stockEnv) int
}

// stockEnv is what a nemesis can break: the lock server, the proxy in front
// of it, and the app processes. The resource lives on a separate server that
// is never faulted.
type stockEnv struct {
	t      *testing.T
	lock   *redisserver.Server
	proxy  *faultproxy.Proxy
	apps   []*child
	faults []string
	stalls []check.Stall // the nemesis's windows in which the server applied nothing
}

type stockResult struct {
	ops            []history.Op
	final          int64
	faults         int
	violations     map[string]int
	staleRejected  int
	grants, writes int
}

func runStock(t *testing.T, r stockRun) stockResult {
	t.Helper()
	t.Logf("seed %d (%+v)", r.Seed, r)
	lockSrv := redisserver.Start(t, r.ServerOpts...)
	resSrv, res := newRedis(t)
	ctx := testCtx(t, r.Run+90*time.Second)
	if err := res.HSet(ctx, resKey, "value", r.Stock, "fence", 0).Err(); err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.New(lockSrv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	e := &stockEnv{t: t, lock: lockSrv, proxy: proxy}
	for p := range r.Procs {
		e.apps = append(e.apps, spawn(t, "stock", map[string]string{
			"LOCK_ADDR": proxy.Addr(), "RES_ADDR": resSrv.Addr(), "LOCK": lockKey, "RES": resKey,
			"TTL": r.TTL.String(), "RUN": r.Run.String(), "MODE": r.Mode, "STORE": r.Store,
			"WORKERS": strconv.Itoa(r.Workers), "PROC": strconv.Itoa(p + 1), "SEED": strconv.FormatUint(r.Seed, 10),
		}))
	}
	var out stockResult
	nctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if r.Nemesis != nil {
		wg.Go(func() { out.faults = r.Nemesis(nctx, e) })
	}
	for i, a := range e.apps {
		ops, err := a.wait()
		if err != nil {
			t.Errorf("app %d: %v", i, err)
		}
		out.ops = append(out.ops, ops...)
	}
	stop()
	wg.Wait()
	history.Sort(out.ops)
	v, err := res.HGet(ctx, resKey, "value").Int64()
	if err != nil {
		t.Fatal(err)
	}
	out.final = v
	if f := os.Getenv("DLOCK_CHAOS_DUMP"); f != "" {
		if fh, err := os.Create(f); err == nil {
			_ = history.Encode(fh, out.ops)
			_ = fh.Close()
		}
	}
	out.violations = verify(t, out.ops, r.Stock, v, e.stalls...)
	out.tally()
	t.Logf("RESULT seed=%d procs=%d workers=%d faults=%d ops=%d grants=%d writes=%d stale-rejected=%d final=%d violations=%v",
		r.Seed, r.Procs, r.Workers, out.faults, len(out.ops), out.grants, out.writes, out.staleRejected, v, out.violations)
	if len(e.faults) > 0 {
		t.Logf("fault schedule: %v", e.faults)
	}
	return out
}

// tally counts grants, accepted writes and rejected stale writes.
func (out *stockResult) tally() {
	for _, op := range out.ops {
		switch {
		case op.Kind == history.Write && op.Outcome == history.Failed:
			out.staleRejected++
		case op.Kind == history.Write && op.Outcome == history.Ok:
			out.writes++
		case op.Kind == history.Acquire && op.Outcome == history.Ok:
			out.grants++
		}
	}
}

// verify runs every checker over a history and returns violations per
// checker (logging the first few of each). stalls are the windows in which
// the lock server applied nothing (see check.Stall).
func verify(t *testing.T, ops []history.Op, initial, final int64, stalls ...check.Stall) map[string]int {
	t.Helper()
	found := map[string][]check.Violation{
		"mutual-exclusion": check.MutualExclusion(ops),
		"fence-order":      check.FenceOrder(ops),
		"fenced-write":     check.AcceptedWrites(ops),
		"stock":            check.Stock(initial, final, ops),
		"liveness":         check.Liveness(ops, slack, stalls...),
	}
	start := time.Now()
	if err := check.Linearizable(ops, 5*time.Millisecond, 60*time.Second); err != nil {
		found["linearizable"] = []check.Violation{{Check: "linearizable", Msg: err.Error()}}
	}
	t.Logf("porcupine: %d ops checked in %v", len(ops), time.Since(start).Round(time.Millisecond))
	counts := map[string]int{}
	for name, vs := range found {
		counts[name] = len(vs)
		for i, v := range vs {
			if i == 3 {
				t.Logf("  … %d more %s violations", len(vs)-3, name)
				break
			}
			t.Logf("  violation %s", v)
		}
	}
	return counts
}

func total(v map[string]int) int {
	n := 0
	for _, c := range v {
		n += c
	}
	return n
}

func seed() uint64 { return uint64(time.Now().UnixNano()) }

// R3. Invariant: the stock goes from N to 0 by exactly N successful
// decrements, never below zero, no request counted twice, fences increase,
// no two validity windows overlap, and the lock history is linearizable.
// Pass: zero violations on every checker and the stock sold out.
func TestStockTwoProcessesZeroViolations(t *testing.T) {
	res := runStock(t, stockRun{Procs: 2, Workers: 3, Stock: 40, TTL: 500 * time.Millisecond, Run: 20 * time.Second, Mode: "fenced", Seed: seed()})
	if n := total(res.violations); n != 0 || res.final != 0 {
		t.Fatalf("violations %v, final stock %d (want none, 0)", res.violations, res.final)
	}
}

// Negative control for R3: without a lock the same run must lose updates.
func TestStockNegativeControlNoLockLosesUpdates(t *testing.T) {
	res := runStock(t, stockRun{Procs: 2, Workers: 3, Stock: 40, TTL: 500 * time.Millisecond, Run: 20 * time.Second, Mode: "nolock", Seed: seed()})
	if res.violations["stock"] == 0 {
		t.Fatalf("no lost update detected without a lock: %v", res.violations)
	}
}

// Negative control for R3: a store whose acquire skips the owner check must
// show overlapping windows, a non-linearizable history and lost updates.
func TestStockNegativeControlNoOwnerCheck(t *testing.T) {
	res := runStock(t, stockRun{Procs: 2, Workers: 3, Stock: 40, TTL: 500 * time.Millisecond, Run: 20 * time.Second, Mode: "unfenced", Store: "nocheck", Seed: seed()})
	for _, c := range []string{"mutual-exclusion", "linearizable", "stock"} {
		if res.violations[c] == 0 {
			t.Errorf("%s: no violation detected with a lock that never checks: %v", c, res.violations)
		}
	}
}

var _ = fmt.Sprint
