package redisstore_test

import (
	"testing"
	"time"
)

// A reader's release that leaves other holdings publishes nothing (it lets
// no waiter in); the release that leaves the key free publishes, as does a
// writer's. Read off the channel in order, with a marker published by the
// test after the releases, so that no quiet window is timed: a message
// before the marker that should not be there shows as the marker arriving
// late. Control: the last reader's and the writer's releases do publish.
func TestRWReleasePublishesWhenTheKeyIsFree(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	h, _ := s.RWKeys("k")
	sub := rdb.Subscribe(ctx, h+":released")
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	next := func(want string) {
		t.Helper()
		m, err := sub.ReceiveMessage(ctx)
		if err != nil || m.Payload != want {
			t.Fatalf("next message %+v %v, want %q", m, err, want)
		}
	}
	for _, tok := range []string{"a", "b", "c"} {
		if _, err := s.AcquireRead(ctx, "k", tok, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	for _, tok := range []string{"a", "b"} {
		if err := s.ReleaseRW(ctx, "k", tok); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Publish(ctx, h+":released", "marker").Err(); err != nil {
		t.Fatal(err)
	}
	next("marker") // nothing from the two readers who left one behind
	if err := s.ReleaseRW(ctx, "k", "c"); err != nil {
		t.Fatal(err)
	}
	next("released") // control: the last reader's release
	if _, err := s.AcquireWrite(ctx, "k", "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseRW(ctx, "k", "w"); err != nil {
		t.Fatal(err)
	}
	next("released") // control: the writer's release
}
