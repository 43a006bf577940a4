package drivertest

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases of the idempotency suite about time (leases, takeovers,
// retention) and concurrency.

// takenOverWithin polls BeginRecord by a fresh token until it starts an
// execution or d elapses, and returns its answer (State 0 if it never
// started).
func (s *suite) takenOverWithin(t *testing.T, m driver.Idempotency, id driver.RecordID, fp string, d time.Duration) (string, driver.RecordBegin) {
	t.Helper()
	tok := Token()
	var b driver.RecordBegin
	var err error
	if eventually(d, func() bool {
		b, err = m.BeginRecord(ctx(t), id, tok, fp, s.long, s.long)
		return err != nil || b.State == driver.RecordStarted
	}) && err == nil {
		return tok, b
	}
	if err != nil {
		t.Fatalf("BeginRecord while polling: %v", err)
	}
	return tok, driver.RecordBegin{}
}

// testIdemTakeover: an executor whose lease passes is taken over by the
// next BeginRecord, with a greater fence; before that, callers learn it is
// in flight.
func (s *suite) testIdemTakeover(t *testing.T, m driver.Idempotency) {
	s.perKeyOnly(t)
	id, a := recordID(t), Token()
	ga, err := m.BeginRecord(ctx(t), id, a, "fp", s.ttl, s.long)
	if err != nil || ga.State != driver.RecordStarted {
		t.Fatalf("BeginRecord(lease %v) = %+v, %v", s.ttl, ga, err)
	}
	if in := s.begin(t, m, id, Token(), "fp"); in.State != driver.RecordInFlight {
		t.Fatalf("BeginRecord within the lease = %v, want in flight", in.State)
	}
	start := time.Now()
	_, gb := s.takenOverWithin(t, s.idemClient(t), id, "fp", s.ttl+s.slack)
	if gb.State != driver.RecordStarted {
		t.Fatalf("no takeover within %v of an executor's lease of %v", s.ttl+s.slack, s.ttl)
	}
	t.Logf("taken over after %v", time.Since(start))
	if !gb.TookOver || gb.Fence <= ga.Fence {
		t.Fatalf("takeover = %+v after fence %d: want TookOver and a greater fence", gb, ga.Fence)
	}
}

// testIdemResentTakeover: a takeover's BeginRecord resent by its executor
// (its reply lost) answers as the first did: started, the same fence and
// TookOver, so that the function still learns that an earlier execution
// may have done part of the work.
func (s *suite) testIdemResentTakeover(t *testing.T, m driver.Idempotency) {
	s.perKeyOnly(t)
	id := recordID(t)
	if ga, err := m.BeginRecord(ctx(t), id, Token(), "fp", s.ttl, s.long); err != nil || ga.State != driver.RecordStarted {
		t.Fatalf("BeginRecord(lease %v) = %+v, %v", s.ttl, ga, err)
	}
	c := s.idemClient(t)
	b, gb := s.takenOverWithin(t, c, id, "fp", s.ttl+s.slack)
	if gb.State != driver.RecordStarted || !gb.TookOver {
		t.Fatalf("takeover within %v of a lease of %v = %+v, want started, TookOver", s.ttl+s.slack, s.ttl, gb)
	}
	again, err := c.BeginRecord(ctx(t), id, b, "fp", s.long, s.long)
	if err != nil || again.State != driver.RecordStarted || again.Fence != gb.Fence || !again.TookOver {
		t.Fatalf("resent takeover BeginRecord = %+v, %v; want started, fence %d, TookOver", again, err, gb.Fence)
	}
}

// testIdemStale: once taken over, the paused executor can neither
// complete, extend nor abandon the record, before or after the new
// executor completes it; the new executor's result is the one replayed.
func (s *suite) testIdemStale(t *testing.T, m driver.Idempotency) {
	s.perKeyOnly(t)
	id, a := recordID(t), Token()
	ga, err := m.BeginRecord(ctx(t), id, a, "fp", s.ttl, s.long)
	if err != nil || ga.State != driver.RecordStarted {
		t.Fatalf("BeginRecord(lease %v) = %+v, %v", s.ttl, ga, err)
	}
	other := s.idemClient(t)
	b, gb := s.takenOverWithin(t, other, id, "fp", s.ttl+s.slack)
	if gb.State != driver.RecordStarted {
		t.Fatalf("no takeover within %v of a lease of %v", s.ttl+s.slack, s.ttl)
	}
	wantStale(t, "the stale executor's CompleteRecord", m.CompleteRecord(ctx(t), id, a, ga.Fence, []byte("stale")), driver.ErrTaken)
	wantStale(t, "the stale executor's ExtendRecord", m.ExtendRecord(ctx(t), id, a, ga.Fence, s.long), driver.ErrTaken)
	wantStale(t, "the stale executor's AbandonRecord", m.AbandonRecord(ctx(t), id, a, ga.Fence), driver.ErrTaken)
	mustComplete(t, other, id, b, gb.Fence, []byte("fresh"))
	wantStale(t, "the stale executor's CompleteRecord after completion", m.CompleteRecord(ctx(t), id, a, ga.Fence, []byte("stale")), driver.ErrTaken)
	s.wantCompleted(t, m, id, "fp", gb.Fence, []byte("fresh"))
}

// testIdemExtend: ExtendRecord keeps an executor's lease past its first
// length, and a shorter one lets a takeover come sooner.
func (s *suite) testIdemExtend(t *testing.T, m driver.Idempotency) {
	s.perKeyOnly(t)
	id, a := recordID(t), Token()
	ga, err := m.BeginRecord(ctx(t), id, a, "fp", s.ttl, s.long)
	if err != nil || ga.State != driver.RecordStarted {
		t.Fatalf("BeginRecord(lease %v) = %+v, %v", s.ttl, ga, err)
	}
	if err := m.ExtendRecord(ctx(t), id, a, ga.Fence, s.long); err != nil {
		t.Fatalf("ExtendRecord: %v", err)
	}
	if _, b := s.takenOverWithin(t, s.idemClient(t), id, "fp", s.ttl+s.slack); b.State != 0 {
		t.Fatalf("taken over (%+v) within %v although the lease was extended to %v", b, s.ttl+s.slack, s.long)
	}
	if err := m.ExtendRecord(ctx(t), id, a, ga.Fence, s.ttl); err != nil {
		t.Fatalf("ExtendRecord shorter: %v", err)
	}
	if _, b := s.takenOverWithin(t, s.idemClient(t), id, "fp", s.ttl+s.slack); b.State != driver.RecordStarted {
		t.Fatalf("no takeover within %v of a lease cut to %v", s.ttl+s.slack, s.ttl)
	}
}

// testIdemAbandon: an abandoned record is gone: the next BeginRecord starts
// afresh (no takeover), and the abandoning executor is stale.
func (s *suite) testIdemAbandon(t *testing.T, m driver.Idempotency) {
	id, a := recordID(t), Token()
	ga := s.mustStart(t, m, id, a, "fp")
	if err := m.AbandonRecord(ctx(t), id, a, ga.Fence); err != nil {
		t.Fatalf("AbandonRecord: %v", err)
	}
	gb := s.mustStart(t, s.idemClient(t), id, Token(), "another fp") // the fingerprint went with it
	if gb.TookOver {
		t.Fatalf("BeginRecord after an abandon = %+v, want a fresh start", gb)
	}
	wantStale(t, "CompleteRecord after the abandon", m.CompleteRecord(ctx(t), id, a, ga.Fence, []byte("x")), driver.ErrTaken)
	gone := recordID(t)
	gg := s.mustStart(t, m, gone, a, "fp")
	if err := m.AbandonRecord(ctx(t), gone, a, gg.Fence); err != nil {
		t.Fatalf("AbandonRecord: %v", err)
	}
	wantStale(t, "CompleteRecord of an abandoned record", m.CompleteRecord(ctx(t), gone, a, gg.Fence, []byte("x")), driver.ErrExpired)
	wantStale(t, "AbandonRecord again", m.AbandonRecord(ctx(t), gone, a, gg.Fence), driver.ErrExpired)
}

// testIdemRetention: a completed record is replayed during its retention
// and forgotten after it; an in-flight one left alone is forgotten after
// its lease and retention; neither leaves state (StateReporter).
func (s *suite) testIdemRetention(t *testing.T, m driver.Idempotency) {
	s.perKeyOnly(t)
	done, left, a := recordID(t), recordID(t), Token()
	g, err := m.BeginRecord(ctx(t), done, a, "fp", s.long, s.ttl)
	if err != nil || g.State != driver.RecordStarted {
		t.Fatalf("BeginRecord(retention %v) = %+v, %v", s.ttl, g, err)
	}
	mustComplete(t, m, done, a, g.Fence, []byte("r"))
	if _, err := m.BeginRecord(ctx(t), left, Token(), "fp", s.ttl, s.ttl); err != nil {
		t.Fatalf("BeginRecord: %v", err)
	}
	if b := s.begin(t, m, done, Token(), "fp"); b.State != driver.RecordCompleted {
		t.Fatalf("BeginRecord within the retention = %v, want completed (control)", b.State)
	}
	_, b := s.takenOverWithin(t, m, done, "fp", s.ttl+s.slack)
	if b.State != driver.RecordStarted || b.TookOver {
		t.Fatalf("a record completed with a retention of %v was not forgotten within %v (got %+v)", s.ttl, s.ttl+s.slack, b)
	}
	r, ok := driver.As[StateReporter](m)
	if !ok {
		t.Skip("store does not report its per-key state (drivertest.StateReporter)")
	}
	if !eventually(2*s.ttl+s.slack, func() bool {
		n, err := r.KeyState(ctx(t), left.Key)
		return err == nil && n == 0
	}) {
		t.Fatalf("an in-flight record left alone (lease and retention %v) still has state after %v", s.ttl, 2*s.ttl+s.slack)
	}
}

// idemRaceRecord is what the racers of one round of testIdemRace observe.
type idemRaceRecord struct {
	executions atomic.Int32
	mu         sync.Mutex
	results    map[string]int // result seen -> callers
	errs       []error
}

// testIdemRace: Goroutines goroutines on each of Clients clients begin one
// record at once, Rounds times (a new record each round): exactly one
// executes (counted inside), the others wait for its result, and every
// caller ends with that one result.
func (s *suite) testIdemRace(t *testing.T, m driver.Idempotency) {
	clients := []driver.Idempotency{m}
	for len(clients) < s.h.Clients {
		clients = append(clients, s.idemClient(t))
	}
	deadline := time.Now().Add(30*time.Second + 10*s.slack)
	var twice, callers int
	for round := range s.h.Rounds {
		id := recordID(t)
		rec := idemRaceRecord{results: map[string]int{}}
		startGate := make(chan struct{})
		var wg sync.WaitGroup
		for _, cl := range clients {
			for range s.h.Goroutines {
				wg.Go(func() { <-startGate; s.idemRacer(t, cl, id, deadline, &rec) })
			}
		}
		close(startGate)
		wg.Wait()
		for _, err := range rec.errs[:min(len(rec.errs), 5)] {
			t.Errorf("round %d: racer: %v", round, err)
		}
		if n := rec.executions.Load(); n != 1 {
			twice++
			t.Errorf("round %d: %d executions of one record by %d concurrent callers, want 1", round, n, s.h.Clients*s.h.Goroutines)
		}
		if len(rec.results) != 1 {
			t.Errorf("round %d: the callers ended with %d different results: %v", round, len(rec.results), rec.results)
		}
		callers += s.h.Clients * s.h.Goroutines
	}
	t.Logf("%d rounds of %d callers: %d rounds with more than one execution", s.h.Rounds, s.h.Clients*s.h.Goroutines, twice)
}

// idemRacer begins id; as the executor it counts an execution and
// completes; otherwise it polls until the result is there.
func (s *suite) idemRacer(t *testing.T, m driver.Idempotency, id driver.RecordID, deadline time.Time, rec *idemRaceRecord) {
	c, tok := ctx(t), Token()
	fail := func(err error) { rec.mu.Lock(); rec.errs = append(rec.errs, err); rec.mu.Unlock() }
	for {
		if time.Now().After(deadline) {
			fail(fmt.Errorf("deadline passed"))
			return
		}
		b, err := m.BeginRecord(c, id, tok, "fp", s.long, s.long)
		var res []byte
		switch {
		case err != nil:
			fail(err)
			return
		case b.State == driver.RecordStarted:
			rec.executions.Add(1)
			time.Sleep(2 * time.Millisecond) // work: widens the window a second execution needs
			res = []byte("result of " + tok)
			if err := m.CompleteRecord(c, id, tok, b.Fence, res); err != nil {
				fail(err)
				return
			}
		case b.State == driver.RecordCompleted:
			res = b.Result
		default:
			time.Sleep(5 * time.Millisecond)
			continue
		}
		rec.mu.Lock()
		rec.results[string(bytes.Clone(res))]++
		rec.mu.Unlock()
		return
	}
}
