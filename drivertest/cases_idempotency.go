package drivertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// The idempotency suite: the rules of driver.Idempotency, on stores that
// offer it. Each case names the rule it checks; the timed ones and the
// concurrent one are in cases_idempotency_time.go.

// idempotencySuite lists the cases of the idempotency suite in the order
// they run.
func (s *suite) idempotencySuite() []primitiveCase {
	cs := []struct {
		name string
		fn   func(*testing.T, driver.Idempotency)
	}{
		{"RaceExactlyOneExecution", s.testIdemRace},
		{"CompletedResultIsReplayed", s.testIdemReplay},
		{"ResentCallsAreHarmless", s.testIdemResent},
		{"FingerprintMismatchChangesNothing", s.testIdemMismatch},
		{"TakeoverAfterTheLeaseHasAGreaterFence", s.testIdemTakeover},
		{"ResentTakeoverBeginSaysTookOver", s.testIdemResentTakeover},
		{"StaleExecutorCannotComplete", s.testIdemStale},
		{"ExtendKeepsTheLease", s.testIdemExtend},
		{"AbandonLetsARetryRun", s.testIdemAbandon},
		{"RetentionForgetsTheRecord", s.testIdemRetention},
		{"ResultsUpToTheBoundAreKeptByteExact", s.testIdemBound},
		{"InvalidArgumentsChangeNothing", s.testIdemInvalid},
		{"CancelledContextChangesNothing", s.testIdemCancelled},
	}
	pcs := make([]primitiveCase, len(cs))
	for i, c := range cs {
		pcs[i] = primitiveCase{c.name, func(t *testing.T, st driver.Store) { c.fn(t, st.(driver.Idempotency)) }}
	}
	return pcs
}

// idemClient is a new client of the store as an Idempotency.
func (s *suite) idemClient(t *testing.T) driver.Idempotency {
	t.Helper()
	st := s.store(t)
	m, ok := st.(driver.Idempotency)
	if !ok {
		t.Fatalf("drivertest: Harness.New returned a %T, which is no driver.Idempotency", st)
	}
	return m
}

// RecordID returns a record id unique to this test run, in scope "s".
func recordID(t *testing.T) driver.RecordID { return driver.RecordID{Scope: "s", Key: Key(t)} }

// begin calls BeginRecord with the suite's long lease and retention.
func (s *suite) begin(t *testing.T, m driver.Idempotency, id driver.RecordID, tok, fp string) driver.RecordBegin {
	t.Helper()
	b, err := m.BeginRecord(ctx(t), id, tok, fp, s.long, s.long)
	if err != nil {
		t.Fatalf("BeginRecord(%+v): %v", id, err)
	}
	return b
}

// mustStart begins id as tok and fails unless tok is the executor.
func (s *suite) mustStart(t *testing.T, m driver.Idempotency, id driver.RecordID, tok, fp string) driver.RecordBegin {
	t.Helper()
	b := s.begin(t, m, id, tok, fp)
	if b.State != driver.RecordStarted || b.Fence == 0 {
		t.Fatalf("BeginRecord of a new record = %+v, want started with a fence > 0", b)
	}
	return b
}

func mustComplete(t *testing.T, m driver.Idempotency, id driver.RecordID, tok string, fence uint64, res []byte) {
	t.Helper()
	if err := m.CompleteRecord(ctx(t), id, tok, fence, res); err != nil {
		t.Fatalf("CompleteRecord(fence %d): %v", fence, err)
	}
}

// wantStale asserts the stale-executor error with its cause.
func wantStale(t *testing.T, what string, err, cause error) {
	t.Helper()
	if !errors.Is(err, driver.ErrStaleFence) || !errors.Is(err, driver.ErrNotHeld) || !errors.Is(err, cause) {
		t.Fatalf("%s: got %v, want ErrStaleFence and ErrNotHeld with cause %v", what, err, cause)
	}
}

// wantCompleted asserts that a fresh token's BeginRecord replays res.
func (s *suite) wantCompleted(t *testing.T, m driver.Idempotency, id driver.RecordID, fp string, fence uint64, res []byte) {
	t.Helper()
	b := s.begin(t, m, id, Token(), fp)
	if b.State != driver.RecordCompleted || b.Fence != fence || !bytes.Equal(b.Result, res) {
		t.Fatalf("BeginRecord of a completed record = %v fence %d result %.40q, want completed fence %d result %.40q", b.State, b.Fence, b.Result, fence, res)
	}
	if b.Remaining <= 0 || b.Remaining > s.long {
		t.Fatalf("completed record: retention left %v, want (0, %v]", b.Remaining, s.long)
	}
}

// testIdemReplay: the executor is told so; another caller, on any client,
// learns the lease while it runs and the very result once it completed.
func (s *suite) testIdemReplay(t *testing.T, m driver.Idempotency) {
	id, a := recordID(t), Token()
	b := s.mustStart(t, m, id, a, "fp")
	if b.TookOver || b.Remaining <= 0 || b.Remaining > s.long {
		t.Fatalf("a new record's begin = %+v, want no takeover and the lease (0, %v]", b, s.long)
	}
	other := s.idemClient(t)
	in := s.begin(t, other, id, Token(), "fp")
	if in.State != driver.RecordInFlight || in.Fence != b.Fence || in.Remaining == 0 || in.Remaining > s.long {
		t.Fatalf("BeginRecord while in flight = %+v, want in flight, fence %d, lease left (0, %v] or negative", in, b.Fence, s.long)
	}
	res := []byte("HTTP/1.1 201\x00{\"charge\":\"ch_1\"}\xff")
	mustComplete(t, m, id, a, b.Fence, res)
	s.wantCompleted(t, other, id, "fp", b.Fence, res)
	s.wantCompleted(t, m, id, "fp", b.Fence, res)
	empty := recordID(t)
	e := s.mustStart(t, m, empty, a, "")
	mustComplete(t, m, empty, a, e.Fence, nil)
	s.wantCompleted(t, other, empty, "", e.Fence, nil)
}

// testIdemResent: a resent BeginRecord of the executor is the same
// execution; a resent CompleteRecord answers nil and changes nothing; a
// completion by anyone else is refused.
func (s *suite) testIdemResent(t *testing.T, m driver.Idempotency) {
	id, a := recordID(t), Token()
	b := s.mustStart(t, m, id, a, "fp")
	again := s.begin(t, m, id, a, "fp")
	if again.State != driver.RecordStarted || again.Fence != b.Fence || again.TookOver {
		t.Fatalf("resent BeginRecord = %+v, want started with fence %d again", again, b.Fence)
	}
	wantStale(t, "CompleteRecord by another token", m.CompleteRecord(ctx(t), id, Token(), b.Fence, []byte("x")), driver.ErrTaken)
	wantStale(t, "CompleteRecord with another fence", m.CompleteRecord(ctx(t), id, a, b.Fence+1, []byte("x")), driver.ErrTaken)
	mustComplete(t, m, id, a, b.Fence, []byte("one"))
	mustComplete(t, s.idemClient(t), id, a, b.Fence, []byte("one")) // resent
	wantStale(t, "CompleteRecord by another token after completion", m.CompleteRecord(ctx(t), id, Token(), b.Fence, []byte("two")), driver.ErrTaken)
	wantStale(t, "AbandonRecord of a completed record", m.AbandonRecord(ctx(t), id, a, b.Fence), driver.ErrTaken)
	wantStale(t, "ExtendRecord of a completed record", m.ExtendRecord(ctx(t), id, a, b.Fence, s.long), driver.ErrTaken)
	s.wantCompleted(t, m, id, "fp", b.Fence, []byte("one"))
}

// testIdemMismatch: another fingerprint is refused while in flight and
// once completed, taking nothing; the scope separates records.
func (s *suite) testIdemMismatch(t *testing.T, m driver.Idempotency) {
	id, a := recordID(t), Token()
	b := s.mustStart(t, m, id, a, "fp-a")
	for _, st := range []driver.RecordState{driver.RecordInFlight, driver.RecordCompleted} {
		_, err := s.idemClient(t).BeginRecord(ctx(t), id, Token(), "fp-b", s.long, s.long)
		var fe *driver.FingerprintMismatchError
		if !errors.As(err, &fe) || !errors.Is(err, driver.ErrMismatch) || fe.State != st {
			t.Fatalf("BeginRecord with another fingerprint (record %v): got %v, want *FingerprintMismatchError{%v} matching ErrMismatch", st, err, st)
		}
		if st == driver.RecordInFlight {
			mustComplete(t, m, id, a, b.Fence, []byte("a")) // the refusal took nothing over
		}
	}
	s.wantCompleted(t, m, id, "fp-a", b.Fence, []byte("a"))
	other := driver.RecordID{Scope: "another scope", Key: id.Key}
	s.mustStart(t, m, other, Token(), "fp-b") // same key, another scope: another record
	s.mustStart(t, m, driver.RecordID{Scope: "", Key: id.Key}, Token(), "fp-b")
}

// testIdemBound: a result of MaxResultLen bytes (any bytes) is stored and
// replayed as it was; one byte more is a *ResultTooLargeError (ErrInvalid)
// that stores nothing.
func (s *suite) testIdemBound(t *testing.T, m driver.Idempotency) {
	id, a := recordID(t), Token()
	b := s.mustStart(t, m, id, a, "fp")
	big := make([]byte, driver.MaxResultLen+1)
	_, _ = rand.Read(big)
	err := m.CompleteRecord(ctx(t), id, a, b.Fence, big)
	var re *driver.ResultTooLargeError
	if !errors.As(err, &re) || !errors.Is(err, driver.ErrInvalid) || re.Size != len(big) {
		t.Fatalf("CompleteRecord of %d bytes: got %v, want *ResultTooLargeError matching ErrInvalid", len(big), err)
	}
	if in := s.begin(t, m, id, Token(), "fp"); in.State != driver.RecordInFlight {
		t.Fatalf("after a refused result the record is %v, want still in flight", in.State)
	}
	mustComplete(t, m, id, a, b.Fence, big[:driver.MaxResultLen])
	s.wantCompleted(t, m, id, "fp", b.Fence, big[:driver.MaxResultLen])
}

// testIdemInvalid: bad arguments return errors matching ErrInvalid and
// change nothing.
func (s *suite) testIdemInvalid(t *testing.T, m driver.Idempotency) {
	id, tok := recordID(t), Token()
	long := strings.Repeat("k", driver.MaxKeyLen+1)
	ids := []driver.RecordID{{Key: ""}, {Key: long}, {Key: "\xff"}, {Scope: long, Key: "k"}, {Scope: "\xff", Key: "k"}}
	for _, bad := range ids {
		if _, err := m.BeginRecord(ctx(t), bad, tok, "", s.long, s.long); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("BeginRecord(%.12q) = %v, want ErrInvalid", bad, err)
		}
	}
	begins := []struct {
		tok, fp     string
		lease, keep time.Duration
	}{{"", "", s.long, s.long}, {strings.Repeat("t", driver.MaxTokenLen+1), "", s.long, s.long},
		{tok, strings.Repeat("f", driver.MaxFingerprintLen+1), s.long, s.long},
		{tok, "", 0, s.long}, {tok, "", -time.Second, s.long}, {tok, "", s.long, 0}, {tok, "", s.long, -time.Second}}
	for _, b := range begins {
		if _, err := m.BeginRecord(ctx(t), id, b.tok, b.fp, b.lease, b.keep); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("BeginRecord(token %d bytes, fingerprint %d bytes, lease %v, retention %v) = %v, want ErrInvalid", len(b.tok), len(b.fp), b.lease, b.keep, err)
		}
	}
	g := s.mustStart(t, m, id, tok, "fp") // nothing was created
	for _, bad := range []driver.RecordID{{Key: ""}, {Scope: "\xff", Key: id.Key}} {
		if err := m.CompleteRecord(ctx(t), bad, tok, g.Fence, nil); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("CompleteRecord(%.12q) = %v, want ErrInvalid", bad, err)
		}
		if err := m.AbandonRecord(ctx(t), bad, tok, g.Fence); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("AbandonRecord(%.12q) = %v, want ErrInvalid", bad, err)
		}
	}
	for _, lease := range []time.Duration{0, -time.Second} {
		if err := m.ExtendRecord(ctx(t), id, tok, g.Fence, lease); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ExtendRecord(lease %v) = %v, want ErrInvalid", lease, err)
		}
	}
	if err := m.CompleteRecord(ctx(t), id, "", g.Fence, nil); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("CompleteRecord with an empty token = %v, want ErrInvalid", err)
	}
	if in := s.begin(t, m, id, Token(), "fp"); in.State != driver.RecordInFlight || in.Fence != g.Fence {
		t.Fatalf("after refused calls the record is %+v, want in flight with fence %d", in, g.Fence)
	}
}

// testIdemCancelled: calls with a done ctx fail and change nothing.
func (s *suite) testIdemCancelled(t *testing.T, m driver.Idempotency) {
	id, a := recordID(t), Token()
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.BeginRecord(c, id, Token(), "fp", s.long, s.long); err == nil {
		t.Fatal("BeginRecord with a cancelled context succeeded")
	}
	b := s.mustStart(t, s.idemClient(t), id, a, "fp") // the cancelled call created nothing
	if err := m.CompleteRecord(c, id, a, b.Fence, []byte("x")); err == nil {
		t.Fatal("CompleteRecord with a cancelled context succeeded")
	}
	if err := m.ExtendRecord(c, id, a, b.Fence, s.long); err == nil {
		t.Fatal("ExtendRecord with a cancelled context succeeded")
	}
	if err := m.AbandonRecord(c, id, a, b.Fence); err == nil {
		t.Fatal("AbandonRecord with a cancelled context succeeded")
	}
	if in := s.begin(t, m, id, Token(), "fp"); in.State != driver.RecordInFlight || in.Fence != b.Fence {
		t.Fatalf("after cancelled calls the record is %+v, want in flight with fence %d", in, b.Fence)
	}
}
