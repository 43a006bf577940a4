package idemtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
)

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
// LostReplies), and reads the record left directly.
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
	b, err := direct.BeginRecord(ctxFor(t), driver.RecordID{Scope: "s", Key: key}, "check", "fp", time.Millisecond, time.Minute)
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

// injectFaults applies a fault drawn from seed every 5–60 ms (times
// spread, 1 or more) until done:
// replies dropped for 50–200 ms then every connection reset (the dropped
// replies never arrive), replies delayed by 100–300 ms (past the clients'
// read timeout) for as long, or every connection reset. It returns how
// many of each it applied.
func injectFaults(p *faultproxy.Proxy, seed uint64, spread int, applied *atomic.Int64, done <-chan struct{}) map[string]int {
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
	for i := 0; i < 1000 && wait(5*spread, 60*spread); i++ {
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
