package chaos_test

import (
	"testing"
	"time"

	"example.com/dlock/internal/redisserver"
)

// R4/R19 (bounded version; the long one is TestChaos under -tags chaos).
// Fault: a seeded random schedule of app SIGSTOP past the TTL, server
// SIGKILL+restart (appendfsync always), server SIGSTOP, CLIENT PAUSE,
// latency, connection resets, replies held past the TTL and blackholes,
// while 3 app processes sell stock. Invariant: as in R3. Pass: zero
// violations on every checker (porcupine Unknown counts as a violation).
func TestStockRandomFaultsZeroViolations(t *testing.T) {
	s := seed()
	ttl := 500 * time.Millisecond
	res := runStock(t, stockRun{
		Procs: 3, Workers: 2, Stock: 1_000_000, TTL: ttl, Run: 10 * time.Second, Mode: "fenced", Seed: s,
		ServerOpts: []redisserver.Option{redisserver.WithAOF(true)}, Nemesis: randomNemesis(s, ttl, 40),
	})
	if n := total(res.violations); n != 0 {
		t.Fatalf("seed %d: violations %v", s, res.violations)
	}
}
