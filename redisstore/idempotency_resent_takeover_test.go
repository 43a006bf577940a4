package redisstore_test

import (
	"testing"
	"time"

	"example.com/dlock/driver"
)

// TestRecordResentTakeoverBeginSaysTookOver: a takeover's begin resent by
// its owner (its reply lost) answers as the first run did: the same fence,
// and TookOver, so that the function still learns that an earlier
// execution may have done part of the work. Before the record kept it, the
// resend answered TookOver false (TestGuardLostRepliesNeverRunTwice saw
// such a takeover under lost replies).
func TestRecordResentTakeoverBeginSaysTookOver(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	id := driver.RecordID{Key: "pay"}
	if _, err := s.BeginRecord(ctx, id, "dead", "fp", time.Millisecond, time.Minute); err != nil {
		t.Fatal(err)
	}
	var took driver.RecordBegin
	for i := 0; i < 1000 && !took.TookOver; i++ { // the 1 ms lease passes on the server's clock
		b, err := s.BeginRecord(ctx, id, "next", "fp", time.Minute, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		took = b
	}
	if took.State != driver.RecordStarted || !took.TookOver {
		t.Fatalf("takeover = %+v, want started, took over", took)
	}
	again, err := s.BeginRecord(ctx, id, "next", "fp", time.Minute, time.Minute)
	if err != nil || again.State != driver.RecordStarted || again.Fence != took.Fence || !again.TookOver {
		t.Fatalf("resent takeover begin = %+v, %v; want started, fence %d, took over", again, err, took.Fence)
	}
	fresh := driver.RecordID{Key: "fresh"}
	first, err := s.BeginRecord(ctx, fresh, "a", "fp", time.Minute, time.Minute)
	if err == nil {
		first, err = s.BeginRecord(ctx, fresh, "a", "fp", time.Minute, time.Minute)
	}
	if err != nil || first.TookOver {
		t.Fatalf("resent begin of a new record = %+v, %v; want not took over", first, err)
	}
}
