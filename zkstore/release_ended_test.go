package zkstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/zkstore"
)

// TestReleaseEndedContext (issue 23): a Release whose context has
// already ended (cancelled, or past its deadline) returns an error
// matching that context's error at once, sends no request and changes
// nothing: the key stays held (a Store with another session contends), and
// so does another key of the same session; the holding is still there for
// a Release with a live context, after which the key is free. On the
// shared ZooKeeper. Negative control: a Release that ignores the ended
// context (it releases) must break an invariant.
func TestReleaseEndedContext(t *testing.T) {
	addrs := server(t).Addrs()
	root := uniq(t)
	s, other := dial(t, root, 10*time.Second, addrs...), dial(t, root, 10*time.Second, addrs...)
	ctx := ctxT(t, 30*time.Second)
	sent := 0
	release := func(c context.Context, k, tk string) error {
		before := zkstore.Requests(s)
		err := s.Release(c, k, tk)
		sent += int(zkstore.Requests(s) - before)
		return err
	}
	if bad := endedRelease(ctx, s, other, release); len(bad) > 0 || sent != 0 {
		t.Fatalf("%d violations: %v; %d requests sent by the ended releases", len(bad), bad, sent)
	}
	ignore := func(c context.Context, k, tk string) error { return s.Release(context.WithoutCancel(c), k, tk) }
	bad := endedRelease(ctx, s, other, ignore)
	if len(bad) == 0 {
		t.Fatal("negative control (a release that ignores ctx): no violation; the test cannot see one")
	}
	t.Logf("control (a release that ignores ctx): %v", bad)
}

// endedRelease holds a and b through s, releases a with ended contexts
// through release, and checks that each returned its context's error at
// once and that nothing changed (other contends for both keys, s still
// holds both), then that a live Release frees a. It returns the
// violations, releasing what it took.
func endedRelease(ctx context.Context, s, other driver.Mutex, release func(context.Context, string, string) error) []string {
	var bad []string
	fail := func(f string, a ...any) { bad = append(bad, fmt.Sprintf(f, a...)) }
	ta, tb, tx := tok(), tok(), tok()
	for k, tk := range map[string]string{"a": ta, "b": tb} {
		if _, err := s.Acquire(ctx, k, tk, time.Minute); err != nil {
			return []string{fmt.Sprintf("acquire %s: %v", k, err)}
		}
	}
	defer func() { _ = s.Release(ctx, "b", tb) }()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Millisecond))
	defer cancel2()
	for _, c := range []context.Context{cancelled, expired} {
		start := time.Now()
		err := release(c, "a", ta)
		if took := time.Since(start); !errors.Is(err, c.Err()) || took > 200*time.Millisecond {
			fail("release with an ended context (%v): %v after %v, want that error at once", c.Err(), err, took)
		}
	}
	for _, k := range []string{"a", "b"} {
		if _, err := other.Acquire(ctx, k, tx, time.Minute); !errors.Is(err, driver.ErrNotAcquired) {
			fail("another session's Acquire(%q) after the ended releases: %v, want contended", k, err)
			if err == nil {
				_ = other.Release(ctx, k, tx)
			}
		}
	}
	for k, tk := range map[string]string{"a": ta, "b": tb} {
		if _, err := s.Extend(ctx, k, tk, time.Minute); err != nil {
			fail("Extend(%q) after the ended releases: %v, want held", k, err)
		}
	}
	if err := s.Release(ctx, "a", ta); err != nil {
		fail("a live Release of a after: %v", err)
	}
	if _, err := other.Acquire(ctx, "a", tx, time.Minute); err != nil {
		fail("another session's Acquire(a) after the live release: %v", err)
	} else {
		_ = other.Release(ctx, "a", tx)
	}
	return bad
}
