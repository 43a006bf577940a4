//go:build chaos

package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"example.com/dlock/internal/redisserver"
)

// envOr reads a positive integer setting of the long run.
func envOr(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestChaos is the long version of TestStockRandomFaultsZeroViolations:
// DLOCK_CHAOS_RUNS runs (default 10) of DLOCK_CHAOS_SECONDS each (default
// 30) with 2–4 app processes, each run with its own printed seed
// (DLOCK_CHAOS_SEED fixes the first one to replay a failure). Pass: zero
// violations in every run. It ends with the negative control under the same
// faults, which must be caught.
//
//	go test -tags chaos -run TestChaos -count=1 -timeout 60m -v ./internal/chaos/
func TestChaos(t *testing.T) {
	runs, secs := envOr("DLOCK_CHAOS_RUNS", 10), envOr("DLOCK_CHAOS_SECONDS", 30)
	base := uint64(envOr("DLOCK_CHAOS_SEED", int(seed()%(1<<62))))
	ttl := 500 * time.Millisecond
	var faults, grants, writes, stale, bad int
	for i := range runs {
		s := base + uint64(i)
		procs := 2 + rand.New(rand.NewPCG(s, 1)).IntN(3)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			res := runStock(t, stockRun{
				Procs: procs, Workers: 2, Stock: 1_000_000, TTL: ttl, Run: time.Duration(secs) * time.Second,
				Mode: "fenced", Seed: s, ServerOpts: []redisserver.Option{redisserver.WithAOF(true)},
				Nemesis: randomNemesis(s, ttl, 10*secs),
			})
			faults, grants, writes, stale = faults+res.faults, grants+res.grants, writes+res.writes, stale+res.staleRejected
			if n := total(res.violations); n != 0 {
				bad++
				t.Errorf("seed %d: violations %v", s, res.violations)
			}
		})
	}
	t.Logf("RESULT chaos runs=%d seconds=%d faults=%d grants=%d writes=%d stale-rejected=%d runs-with-violations=%d",
		runs, secs, faults, grants, writes, stale, bad)
	t.Run("negative-control", func(t *testing.T) {
		res := runStock(t, stockRun{
			Procs: 3, Workers: 2, Stock: 1_000_000, TTL: ttl, Run: 10 * time.Second, Mode: "unfenced", Store: "nocheck",
			Seed: base, ServerOpts: []redisserver.Option{redisserver.WithAOF(true)}, Nemesis: randomNemesis(base, ttl, 100),
		})
		if res.violations["mutual-exclusion"] == 0 || res.violations["stock"] == 0 || res.violations["linearizable"] == 0 {
			t.Fatalf("broken lock under faults not caught: %v", res.violations)
		}
	})
}
