package idemtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
)

// FaultStore is a store server under test behind the fault proxy.
type FaultStore struct {
	// Addr is the server's address (host:port): the proxy forwards to it.
	Addr string
	// Open returns the store of Guard i (0, 1, 2), a client of its own
	// connected to addr (the proxy, or Addr to read the records left),
	// closed when t ends. It may differ by i (Redis: go-redis retries on
	// one of the three).
	Open func(t testing.TB, addr string, i int) driver.Idempotency
	// Spread multiplies the gaps between faults (5–60 ms if 0 or 1): a
	// store whose calls take several round trips (a transaction) and
	// whose clients connect in several needs longer gaps for calls to
	// complete between them.
	Spread int
	// MaxRounds bounds the rounds of 16 fresh keys (8 if 0); a run stops
	// earlier, after 2 rounds, once 6 faults were applied and a begin's
	// reply was lost.
	MaxRounds int
}

// LostReplies: three Guards, each on its own store client through the
// fault proxy, run 4 concurrent Do calls on each of 16 keys, then 4 more
// per key, while the proxy drops replies for 50–200 ms (a blackhole ended
// by a reset), delays them by 100–300 ms (past a client's read timeout,
// where it has one), or resets every connection, at seeded times, every
// 5–60 ms (times FaultStore.Spread). fn always succeeds,
// so a key runs fn once, unless an execution's Do answered an error (its
// completion unconfirmed: the record may be taken over after its lease,
// documented): then one more execution per such failure is allowed, as a
// takeover with a greater fence. Never two executions at once; every
// answer without error is the value of the key's execution with its fence,
// the same for every call of the key; the record left holds it.
// DLOCK_GUARD_FAULTS_SEED sets the seed, printed. The run fails too if no
// begin lost its reply or no key completed: the faults tested nothing.
func LostReplies(t *testing.T, fs FaultStore) {
	seed := rand.Uint64()
	if s, err := strconv.ParseUint(os.Getenv("DLOCK_GUARD_FAULTS_SEED"), 10, 64); err == nil {
		seed = s // the faults' kinds, times and lengths again; not the calls' interleaving
	}
	t.Logf("seed %d", seed)
	r := runGuardFaults(t, fs, seed, false)
	t.Logf("%d calls (%d answered without error), %d executions, %d keys completed, %d replays; lost: %d begins, %d completions; faults %v",
		r.calls, r.answered, r.execs, r.completed, r.replays, r.lostBegins, r.lostCompletes, r.faults)
	for _, v := range r.violations {
		t.Errorf("seed %d: %s", seed, v)
	}
	if r.lostBegins == 0 || r.completed == 0 {
		t.Fatalf("seed %d: %d begins lost, %d keys completed: the faults tested nothing", seed, r.lostBegins, r.completed)
	}
}

// LostRepliesControl is the control of LostReplies: the same harness with
// a store client that takes a begin without an answer for a start
// (instead of resending it with the same token and reading what the store
// decided) must show a violation (an overlap, or a second execution of a
// key whose first one completed), within 3 seeds.
func LostRepliesControl(t *testing.T, fs FaultStore) {
	seed := rand.Uint64()
	for i := range 3 { // bounded: the faults are timed, not scripted
		s := seed + uint64(i)
		r := runGuardFaults(t, fs, s, true)
		t.Logf("seed %d: %d executions, %d begins lost, %d violations", s, r.execs, r.lostBegins, len(r.violations))
		if len(r.violations) > 0 {
			t.Logf("first: %s", r.violations[0])
			return
		}
	}
	t.Fatalf("seeds %d..%d: no violation with a begin's silence taken for a start: the harness proves nothing", seed, seed+2)
}

// runGuardFaults runs the Guards' calls under faults drawn from seed (see
// LostReplies), on keys of the seed's own, and checks them; mutant wraps
// each store in a client that takes a begin's silence for a start.
func runGuardFaults(t *testing.T, fs FaultStore, seed uint64, mutant bool) faultReport {
	t.Helper()
	p, err := faultproxy.New(fs.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	t.Cleanup(p.Clear) // a blackholed connection would hold up the clients' close
	stores, guards := faultGuards(t, fs, p.Addr(), mutant)
	const keys, callers = 16, 4
	maxRounds := fs.MaxRounds
	if maxRounds == 0 {
		maxRounds = 8
	}
	var logs []*keyLog
	done := make(chan struct{})
	faults := make(chan map[string]int, 1)
	var applied atomic.Int64
	go func() { faults <- injectFaults(p, seed, max(fs.Spread, 1), &applied, done) }()
	var seq atomic.Int64
	lost := func() (n int64) {
		for _, s := range stores {
			n += s.lostBegins.Load()
		}
		return n
	}
	// Rounds of fresh keys, until the faults have had their chance: 6 of
	// them, and a begin's reply lost (a store without a read timeout loses
	// none to a delay).
	for round := 0; round < maxRounds && (round < 2 || applied.Load() < 6 || lost() == 0); round++ {
		for k := range keys {
			logs = append(logs, &keyLog{key: fmt.Sprintf("%x-r%d-k%d", seed, round, k)})
		}
		for wave := range 2 {
			var wg sync.WaitGroup
			for k, l := range logs[round*keys:] {
				for c := range callers {
					g := guards[(k+c+wave)%len(guards)]
					wg.Go(func() { guardCall(g, l, &seq) })
				}
			}
			wg.Wait()
		}
	}
	close(done)
	r := faultReport{calls: 2 * len(logs) * callers, faults: <-faults}
	p.Clear()
	for _, s := range stores {
		r.lostBegins += s.lostBegins.Load()
		r.lostCompletes += s.lostCompletes.Load()
	}
	direct := fs.Open(t, fs.Addr, 0)
	for _, l := range logs {
		r.check(t, direct, l)
	}
	return r
}

// faultGuards returns the Guards of runGuardFaults, each on its own store
// client to addr, and their counting stores, warmed up (connections open,
// statements or scripts ready) before any fault.
func faultGuards(t *testing.T, fs FaultStore, addr string, mutant bool) ([]*lostReplyStore, []*dlock.Guard) {
	t.Helper()
	var stores []*lostReplyStore
	var guards []*dlock.Guard
	for i := range 3 {
		ls := &lostReplyStore{Idempotency: fs.Open(t, addr, i), startsOnSilence: mutant}
		g, err := dlock.NewGuard(ls, time.Hour, dlock.WithAutoRenew(2*time.Second), dlock.WithWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		g = g.Scope("s")
		if _, err := g.Do(ctxFor(t), fmt.Sprint("warm-", i), "fp", func(context.Context, dlock.Execution) ([]byte, error) { return []byte("warm"), nil }); err != nil {
			t.Fatalf("warm-up of Guard %d: %v", i, err)
		}
		stores, guards = append(stores, ls), append(guards, g)
	}
	return stores, guards
}
