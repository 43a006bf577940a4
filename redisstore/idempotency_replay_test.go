package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// TestRecordResentCallsAnswerWhatTheFirstRunDid: an idempotency call whose
// reply is lost and that go-redis resends (MaxRetries 3, a broken
// connection) answers what its first run did: a resent begin is the same
// execution (one executor, one fence), a resent completion answers nil
// with the result as stored, even after another client read it, and a
// resent abandon finds the record gone (ErrExpired): never two executions,
// never a wrong replay.
func TestRecordResentCallsAnswerWhatTheFirstRunDid(t *testing.T) {
	r := newReplayRig(t, 3)
	ctx := testCtx(t)
	warmIdempotencyScripts(t, r.store)
	field := func(id driver.RecordID, f string) string { return r.rdb.HGet(ctx, r.store.RecordKey(id), f).Val() }
	drop := func(op func() error, landed func() bool, between func()) error {
		t.Helper()
		resent, err := r.dropFirstReply(t, op, landed, between)
		if !resent {
			t.Errorf("go-redis did not resend the call (%v): the case tested nothing", err)
		}
		return err
	}
	id := driver.RecordID{Scope: "c", Key: "pay"}
	var b driver.RecordBegin
	err := drop(func() (err error) {
		b, err = r.store.BeginRecord(ctx, id, "a", "fp", time.Minute, time.Hour)
		return err
	},
		func() bool { return field(id, "tok") == "a" }, func() {})
	if err != nil || b.State != driver.RecordStarted || field(id, "fence") == "" || b.Fence == 0 {
		t.Fatalf("resent begin = %+v, %v; want started", b, err)
	}
	if other, err := r.direct.BeginRecord(ctx, id, "b", "fp", time.Minute, time.Hour); err != nil || other.State != driver.RecordInFlight || other.Fence != b.Fence {
		t.Fatalf("another client after the resent begin = %+v, %v; want in flight with fence %d (one executor)", other, err, b.Fence)
	}
	var seen driver.RecordBegin
	err = drop(func() error { return r.store.CompleteRecord(ctx, id, "a", b.Fence, []byte("charged")) },
		func() bool { return field(id, "done") == "1" },
		func() { seen, _ = r.direct.BeginRecord(ctx, id, "c", "fp", time.Minute, time.Hour) })
	if err != nil || seen.State != driver.RecordCompleted || string(seen.Result) != "charged" {
		t.Fatalf("resent completion = %v (another client saw %+v); want nil and the result stored", err, seen)
	}
	if again, _ := r.direct.BeginRecord(ctx, id, "d", "fp", time.Minute, time.Hour); string(again.Result) != "charged" || again.Fence != b.Fence {
		t.Fatalf("replay after the resent completion = %+v, want the first result", again)
	}
	gone := driver.RecordID{Key: "gone"}
	g, err := r.store.BeginRecord(ctx, gone, "a", "fp", time.Minute, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	err = drop(func() error { return r.store.AbandonRecord(ctx, gone, "a", g.Fence) },
		func() bool { return r.rdb.Exists(ctx, r.store.RecordKey(gone)).Val() == 0 }, func() {})
	if !errors.Is(err, driver.ErrStaleFence) || !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("resent abandon = %v, want the stale-executor error with ErrExpired (the record is gone)", err)
	}
}

// warmIdempotencyScripts loads the idempotency scripts through s: a
// NOSCRIPT reply dropped by the proxy would keep EVALSHA from ever falling
// back to EVAL.
func warmIdempotencyScripts(t *testing.T, s driver.Idempotency) {
	t.Helper()
	ctx := testCtx(t)
	for _, k := range []string{"warm-done", "warm-gone"} {
		id := driver.RecordID{Key: k}
		b, err := s.BeginRecord(ctx, id, "w", "", time.Minute, time.Minute)
		if err == nil {
			err = s.ExtendRecord(ctx, id, "w", b.Fence, time.Minute)
		}
		if err == nil && k == "warm-done" {
			err = s.CompleteRecord(ctx, id, "w", b.Fence, nil)
		} else if err == nil {
			err = s.AbandonRecord(ctx, id, "w", b.Fence)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
