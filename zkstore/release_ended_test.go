package zkstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/zkstore"
)

// TestReleaseWithEndedContextSendsNoRequest (issue 23): a Release whose
// context has already ended (cancelled, or past its deadline) sends no
// request to ZooKeeper: it returns the context's error before reaching
// the connection. That nothing changes (the key stays held for a live
// Release, which frees it) is the conformance case
// TestConformance/Mutex/ReleaseWithEndedContextChangesNothing; this test
// counts what the suite cannot see. Negative control: a Release that
// ignores the ended context sends requests, so the count can see one.
func TestReleaseWithEndedContextSendsNoRequest(t *testing.T) {
	s := dial(t, uniq(t), 10*time.Second, server(t).Addrs()...)
	ctx := ctxT(t, 30*time.Second)
	key, tk := "a", tok()
	if _, err := s.Acquire(ctx, key, tk, time.Minute); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancelExpired := context.WithDeadline(ctx, time.Now().Add(-time.Millisecond))
	defer cancelExpired()
	for _, c := range []context.Context{cancelled, expired} {
		before := zkstore.Requests(s)
		err := s.Release(c, key, tk)
		if sent := zkstore.Requests(s) - before; sent != 0 || !errors.Is(err, c.Err()) {
			t.Errorf("Release with an ended context (%v): %v, %d requests sent; want that error and none", c.Err(), err, sent)
		}
	}
	before := zkstore.Requests(s)
	if err := s.Release(context.WithoutCancel(cancelled), key, tk); err != nil {
		t.Fatalf("negative control (a Release that ignores the ended context): %v", err)
	}
	if sent := zkstore.Requests(s) - before; sent == 0 {
		t.Fatal("negative control (a Release that ignores the ended context): no request counted; the test cannot see one")
	} else {
		t.Logf("control (a Release that ignores the ended context): %d requests", sent)
	}
}
