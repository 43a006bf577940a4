package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
)

// TestGuardLostRepliesNeverRunTwice: three Guards, each on its own
// go-redis client through the fault proxy (two without go-redis retries,
// so that the Guard's own resend of a begin is what answers a lost reply;
// one with them), run 4 concurrent Do calls on each of 16 keys, then 4
// more per key, while the proxy drops replies (a blackhole ended by a
// reset), delays them past the clients' read timeout, or resets every
// connection, at seeded times. fn always succeeds, so a key runs fn once,
// unless an execution's Do answered an error (its completion unconfirmed:
// the record may be taken over after its lease, documented): then one more
// execution per such failure is allowed, as a takeover with a greater
// fence. Never two executions at once; every answer without error is the
// value of the key's execution with its fence, the same for every call of
// the key; the record left holds it. DLOCK_GUARD_FAULTS_SEED sets the
// seed. Control:
// TestGuardLostRepliesControlStartsOnSilence.
func TestGuardLostRepliesNeverRunTwice(t *testing.T) {
	seed := rand.Uint64()
	if s, err := strconv.ParseUint(os.Getenv("DLOCK_GUARD_FAULTS_SEED"), 10, 64); err == nil {
		seed = s // the faults' kinds, times and lengths again; not the calls' interleaving
	}
	t.Logf("seed %d", seed)
	r := runGuardFaults(t, seed, false)
	t.Logf("%d calls (%d answered without error), %d executions, %d keys completed, %d replays; lost: %d begins, %d completions; faults %v",
		r.calls, r.answered, r.execs, r.completed, r.replays, r.lostBegins, r.lostCompletes, r.faults)
	for _, v := range r.violations {
		t.Errorf("seed %d: %s", seed, v)
	}
	if r.lostBegins == 0 || r.completed == 0 {
		t.Fatalf("seed %d: %d begins lost, %d keys completed: the faults tested nothing", seed, r.lostBegins, r.completed)
	}
}

// TestGuardLostRepliesControlStartsOnSilence is the control of
// TestGuardLostRepliesNeverRunTwice: the same harness with a store client
// that takes a begin without an answer for a start (instead of resending it
// with the same token and reading what the store decided) must show a
// second execution of a key whose first one completed.
func TestGuardLostRepliesControlStartsOnSilence(t *testing.T) {
	seed := rand.Uint64()
	for i := range 3 { // bounded: the faults are timed, not scripted
		s := seed + uint64(i)
		r := runGuardFaults(t, s, true)
		t.Logf("seed %d: %d executions, %d begins lost, %d violations", s, r.execs, r.lostBegins, len(r.violations))
		if len(r.violations) > 0 {
			t.Logf("first: %s", r.violations[0])
			return
		}
	}
	t.Fatalf("seeds %d..%d: no violation with a begin's silence taken for a start: the harness proves nothing", seed, seed+2)
}

// faultReport is what one run of runGuardFaults saw.
type faultReport struct {
	calls, answered, execs, completed, replays int
	lostBegins, lostCompletes                  int64
	faults                                     map[string]int
	violations                                 []string
}

// execution is one run of fn.
type execution struct {
	fence    uint64
	tookOver bool
	value    string
	failed   error // what its Do answered, if an error
}

func (e *execution) String() string {
	return fmt.Sprintf("{%s fence %d took over %v Do: %v}", e.value, e.fence, e.tookOver, e.failed)
}

// keyLog is what happened to one key.
type keyLog struct {
	key     string
	mu      sync.Mutex
	running int
	overlap int
	execs   []*execution
	answers []dlock.Result // Do calls that answered without error
}

// runGuardFaults runs the Guards' calls under faults drawn from seed (see
// TestGuardLostRepliesNeverRunTwice) and checks them; mutant wraps each
// store in a client that takes a begin's silence for a start.
func runGuardFaults(t *testing.T, seed uint64, mutant bool) faultReport {
	t.Helper()
	srv, direct := newRedis(t)
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	stores, guards := faultGuards(t, p.Addr(), mutant)
	const keys, callers = 16, 4
	var logs []*keyLog
	done := make(chan struct{})
	faults := make(chan map[string]int, 1)
	var applied atomic.Int64
	go func() { faults <- injectFaults(p, seed, &applied, done) }()
	var seq atomic.Int64
	// Rounds of fresh keys, until the faults have had their chance.
	for round := 0; round < 8 && (round < 2 || applied.Load() < 6); round++ {
		for k := range keys {
			logs = append(logs, &keyLog{key: fmt.Sprintf("r%d-k%d", round, k)})
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
	check := newStore(t, direct)
	for _, l := range logs {
		r.check(t, check, l)
	}
	return r
}

// faultGuards returns the Guards of runGuardFaults, each on its own go-redis
// client to addr, and their counting stores.
func faultGuards(t *testing.T, addr string, mutant bool) ([]*lostReplyStore, []*dlock.Guard) {
	t.Helper()
	var stores []*lostReplyStore
	var guards []*dlock.Guard
	for i := range 3 {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: []int{-1, -1, 2}[i],
			DialTimeout: time.Second, ReadTimeout: 150 * time.Millisecond, WriteTimeout: 150 * time.Millisecond})
		t.Cleanup(func() { _ = rdb.Close() })
		s := newStore(t, rdb)
		if i == 0 { // the scripts are the server's: loaded once for all
			warmIdempotencyScripts(t, s)
		}
		ls := &lostReplyStore{Idempotency: s, startsOnSilence: mutant}
		g, err := dlock.NewGuard(ls, time.Hour, dlock.WithAutoRenew(2*time.Second), dlock.WithWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		stores, guards = append(stores, ls), append(guards, g.Scope("s"))
	}
	return stores, guards
}

// guardCall runs one Do of key and logs its executions and answer.
func guardCall(g *dlock.Guard, l *keyLog, seq *atomic.Int64) {
	key := l.key
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var mine *execution
	res, err := g.Do(ctx, key, "fp", func(ctx context.Context, e dlock.Execution) ([]byte, error) {
		mine = &execution{fence: e.Fence, tookOver: e.TookOver, value: fmt.Sprintf("%s#%d", key, seq.Add(1))}
		l.mu.Lock()
		l.running++
		if l.running > 1 {
			l.overlap++
		}
		l.execs = append(l.execs, mine)
		l.mu.Unlock()
		defer func() { l.mu.Lock(); l.running--; l.mu.Unlock() }()
		// Work that spans a few store round trips of the other calls.
		select {
		case <-time.After(time.Duration(5+len(key)%3*5) * time.Millisecond):
		case <-ctx.Done():
		}
		return []byte(mine.value), nil
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil && mine != nil {
		mine.failed = err
	}
	if err == nil {
		l.answers = append(l.answers, res)
	}
}

// check adds to r.violations what key's log breaks (see
// TestGuardLostRepliesNeverRunTwice), and reads the record left directly.
func (r *faultReport) check(t *testing.T, direct driver.Idempotency, l *keyLog) {
	t.Helper()
	key := l.key
	bad := func(format string, args ...any) {
		r.violations = append(r.violations, key+": "+fmt.Sprintf(format, args...))
	}
	r.execs, r.answered = r.execs+len(l.execs), r.answered+len(l.answers)
	if l.overlap > 0 {
		bad("%d executions overlapped", l.overlap)
	}
	failed := 0
	for i, e := range l.execs {
		if i > 0 && (failed < i || !e.tookOver || e.fence <= l.execs[i-1].fence) {
			bad("execution %d of %d after %d whose Do failed: %v", i+1, len(l.execs), failed, l.execs)
		}
		if e.failed != nil {
			failed++
		}
	}
	byValue := map[string]uint64{}
	for _, e := range l.execs {
		byValue[e.value] = e.fence
	}
	for _, a := range l.answers {
		if f, ok := byValue[string(a.Value)]; !ok || f != a.Fence || string(a.Value) != string(l.answers[0].Value) {
			bad("answer %q (fence %d, replayed %v); first answer %q; executions %v", a.Value, a.Fence, a.Replayed, l.answers[0].Value, byValue)
		}
		if a.Replayed {
			r.replays++
		}
	}
	b, err := direct.BeginRecord(testCtx(t), driver.RecordID{Scope: "s", Key: key}, "check", "fp", time.Millisecond, time.Minute)
	if err != nil {
		t.Fatalf("%s: reading the record: %v", key, err)
	}
	if b.State == driver.RecordCompleted {
		r.completed++
		if f, ok := byValue[string(b.Result)]; !ok || f != b.Fence || (len(l.answers) > 0 && string(b.Result) != string(l.answers[0].Value)) {
			bad("the record holds %q (fence %d); executions %v", b.Result, b.Fence, byValue)
		}
	}
}

// injectFaults applies a fault drawn from seed every 5–60 ms until done:
// replies dropped for 50–200 ms then every connection reset (the dropped
// replies never arrive), replies delayed by 100–300 ms (past the clients'
// read timeout) for as long, or every connection reset. It returns how
// many of each it applied.
func injectFaults(p *faultproxy.Proxy, seed uint64, applied *atomic.Int64, done <-chan struct{}) map[string]int {
	rng := rand.New(rand.NewPCG(seed, 0xfa17))
	n := map[string]int{}
	wait := func(lo, hi int) bool {
		select {
		case <-done:
			return false
		case <-time.After(time.Duration(lo+rng.IntN(hi-lo)) * time.Millisecond):
			return true
		}
	}
	for i := 0; i < 1000 && wait(5, 60); i++ {
		applied.Add(1)
		switch rng.IntN(3) {
		case 0:
			n["drop"]++
			p.Blackhole(faultproxy.Downstream, true)
			wait(50, 200)
			p.ResetAll()
			p.Blackhole(faultproxy.Downstream, false)
		case 1:
			n["delay"]++
			p.SetDelay(faultproxy.Downstream, time.Duration(100+rng.IntN(200))*time.Millisecond)
			wait(100, 300)
			p.SetDelay(faultproxy.Downstream, 0)
		default:
			n["reset"]++
			p.ResetAll()
		}
	}
	return n
}

// lostReplyStore counts the begins and completions that got no answer of
// the contract's; with startsOnSilence (the control's mutant) it answers
// such a begin as a start, as a client that takes its own request for
// applied would.
type lostReplyStore struct {
	driver.Idempotency
	startsOnSilence           bool
	lostBegins, lostCompletes atomic.Int64
}

func (s *lostReplyStore) BeginRecord(ctx context.Context, id driver.RecordID, token, fp string, lease, retention time.Duration) (driver.RecordBegin, error) {
	b, err := s.Idempotency.BeginRecord(ctx, id, token, fp, lease, retention)
	if err != nil && noAnswer(err) {
		s.lostBegins.Add(1)
		if s.startsOnSilence {
			return driver.RecordBegin{State: driver.RecordStarted, Remaining: lease}, nil
		}
	}
	return b, err
}

func (s *lostReplyStore) CompleteRecord(ctx context.Context, id driver.RecordID, token string, fence uint64, result []byte) error {
	err := s.Idempotency.CompleteRecord(ctx, id, token, fence, result)
	if err != nil && noAnswer(err) {
		s.lostCompletes.Add(1)
	}
	return err
}

// noAnswer reports whether err is no answer of the store's (the outcome
// unknown) rather than a refusal or the caller's own end.
func noAnswer(err error) bool {
	for _, known := range []error{driver.ErrMismatch, driver.ErrStaleFence, driver.ErrInvalid, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, known) {
			return false
		}
	}
	return true
}
