package zkstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/zkstore"
)

// queued is one AcquireReadQueued or AcquireWriteQueued under way.
type queued struct {
	s    *zkstore.Store
	tok  string
	done chan error
}

func startQueued(t *testing.T, s *zkstore.Store, key string, mode driver.RWMode) *queued {
	t.Helper()
	q := &queued{s: s, tok: tok(), done: make(chan error, 1)}
	ctx := ctxT(t, time.Minute)
	go func() {
		var err error
		if mode == driver.RWWrite {
			_, err = s.AcquireWriteQueued(ctx, key, q.tok, time.Minute)
		} else {
			_, err = s.AcquireReadQueued(ctx, key, q.tok, time.Minute)
		}
		q.done <- err
	}()
	return q
}

// granted waits for q's grant.
func (q *queued) granted(t *testing.T, what string) {
	t.Helper()
	select {
	case err := <-q.done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not granted within 10s", what)
	}
}

// waiting checks that q is still waiting.
func (q *queued) waiting(t *testing.T, what string) {
	t.Helper()
	select {
	case err := <-q.done:
		t.Fatalf("%s returned (%v) while it should wait", what, err)
	case <-time.After(300 * time.Millisecond):
	}
}

// queuedOnKey waits until key's lock path has n nodes (every waiter has
// queued).
func queuedOnKey(t *testing.T, s *zkstore.Store, key string, n int) {
	t.Helper()
	adm := admin(t)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if kids, _, err := adm.Children(s.RWRoot() + "/" + key); err == nil && len(kids) == n {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling the server's state, not synchronising goroutines
	}
	t.Fatalf("key %q never had %d nodes", key, n)
}

// TestRWQueuedWaitersInOrder: behind a reader, a queued writer, two queued
// readers and a second queued writer get the lock in that order (the two
// readers together), and a release wakes only the waiters it lets in:
// the stores of the waiters behind the first writer send no request when
// the reader ahead of it leaves (no herd).
func TestRWQueuedWaitersInOrder(t *testing.T) {
	for _, herd := range []bool{false, true} {
		t.Run(map[bool]string{false: "store", true: "herd(control)"}[herd], func(t *testing.T) { rwQueuedInOrder(t, herd) })
	}
}

// rwQueuedInOrder is TestRWQueuedWaitersInOrder; with herd the waiters
// watch the whole lock path, and those behind the writer must be seen
// waking when the reader ahead of it leaves.
func rwQueuedInOrder(t *testing.T, herd bool) {
	root := uniq(t)
	addrs := server(t).Addrs()
	st := make([]*zkstore.Store, 5)
	for i := range st {
		st[i] = dial(t, root, sessionTimeout, addrs...)
		zkstore.SetRWHerd(st[i], herd)
	}
	ctx := ctxT(t, time.Minute)
	r0 := tok()
	if _, err := st[0].AcquireRead(ctx, "q", r0, time.Minute); err != nil {
		t.Fatal(err)
	}
	w1 := startQueued(t, st[1], "q", driver.RWWrite)
	queuedOnKey(t, st[0], "q", 2)
	r2 := startQueued(t, st[2], "q", driver.RWRead)
	queuedOnKey(t, st[0], "q", 3)
	r3 := startQueued(t, st[3], "q", driver.RWRead)
	queuedOnKey(t, st[0], "q", 4)
	w4 := startQueued(t, st[4], "q", driver.RWWrite)
	queuedOnKey(t, st[0], "q", 5)
	w1.waiting(t, "the writer behind a reader")
	before := []int64{zkstore.Requests(st[2]), zkstore.Requests(st[3]), zkstore.Requests(st[4])}
	mustRelease(t, st[0], "q", r0)
	w1.granted(t, "the writer once the reader ahead left")
	r2.waiting(t, "a reader behind the writer")
	after := []int64{zkstore.Requests(st[2]), zkstore.Requests(st[3]), zkstore.Requests(st[4])}
	woke := 0
	for i := range before {
		if after[i] != before[i] {
			woke++
			t.Logf("waiter %d behind the writer sent %d requests when the reader ahead of the writer left", i+2, after[i]-before[i])
		}
	}
	if (woke > 0) != herd {
		t.Errorf("%d of the 3 waiters behind the writer woke when the reader ahead of it left; want none (all in the control)", woke)
	}
	mustRelease(t, st[1], "q", w1.tok)
	r2.granted(t, "the first reader behind the writer")
	r3.granted(t, "the second reader behind the writer (with the first)")
	w4.waiting(t, "the second writer while two readers read")
	mustRelease(t, st[2], "q", r2.tok)
	w4.waiting(t, "the second writer while one reader reads")
	mustRelease(t, st[3], "q", r3.tok)
	w4.granted(t, "the second writer once the readers left")
	mustRelease(t, st[4], "q", w4.tok)
}

// TestRWQueuedCancelWithdraws: a queued writer whose ctx ends returns the
// ctx's error and deletes its node, so readers behind where it was get in.
func TestRWQueuedCancelWithdraws(t *testing.T) {
	root := uniq(t)
	a, b := dial(t, root, sessionTimeout, server(t).Addrs()...), dial(t, root, sessionTimeout, server(t).Addrs()...)
	ctx := ctxT(t, time.Minute)
	r := tok()
	if _, err := a.AcquireRead(ctx, "c", r, time.Minute); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := b.AcquireWriteQueued(wctx, "c", tok(), time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a queued writer whose ctx ended: %v, want its deadline", err)
	}
	if g, err := b.AcquireRead(ctx, "c", tok(), time.Minute); err != nil || g.Readers != 2 {
		t.Fatalf("a reader after the writer withdrew: %+v, %v; want 2 readers", g, err)
	}
}
