package mysqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestSessionReleaseEndedContext (issue 23): a Release whose context has
// already ended (cancelled, or past its deadline) returns an error
// matching that context's error at once and changes nothing: the key stays
// held (another Session contends), and so does another key on the same
// pinned connection; the holding is still there for a Release with a live
// context, after which the key is free. On the shared MariaDB. Negative
// controls: a Release that ignores the ended context (it releases), and
// one that discards the pinned connection (what the doc once promised),
// each break an invariant; the second frees the other key on the
// connection while its holder believes it still holds it.
func TestSessionReleaseEndedContext(t *testing.T) {
	_, opts := migrated(t, mysqlstore.Options{})
	s := newSession(t, opts.Table, mysqlstore.SessionOptions{})
	other := newSession(t, opts.Table, mysqlstore.SessionOptions{})
	ctx := ctxT(t)
	if bad := endedRelease(ctx, s, other, s.Release); len(bad) > 0 {
		t.Fatalf("%d violations: %v", len(bad), bad)
	}
	ignore := func(c context.Context, k, tk string) error { return s.Release(context.WithoutCancel(c), k, tk) }
	discard := func(c context.Context, k, tk string) error {
		if c.Err() != nil {
			mysqlstore.DiscardHolding(s, k)
			return c.Err()
		}
		return s.Release(c, k, tk)
	}
	for name, rel := range map[string]func(context.Context, string, string) error{"ignores ctx": ignore, "discards": discard} {
		bad := endedRelease(ctx, s, other, rel)
		if len(bad) == 0 {
			t.Fatalf("negative control (a release that %s): no violation; the test cannot see one", name)
		}
		t.Logf("control (a release that %s): %v", name, bad)
	}
}

// TestLeaseReleaseEndedContext: the same schedule on the lease table: the
// ended releases send nothing and change nothing (the key stays held
// until a live release, or the end of its TTL).
func TestLeaseReleaseEndedContext(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	other, err := mysqlstore.New(openDB(t, shared(t).DSN()), opts)
	if err != nil {
		t.Fatal(err)
	}
	if bad := endedRelease(ctxT(t), s, other, s.Release); len(bad) > 0 {
		t.Fatalf("%d violations: %v", len(bad), bad)
	}
}

// endedRelease holds a and b through s (one pinned connection), releases
// a with ended contexts through release, and checks that each returned its
// context's error at once and that nothing changed (other contends for
// both keys, s still holds both), then that a live Release frees a. It
// returns the violations, releasing what it took.
func endedRelease(ctx context.Context, s, other driver.Mutex, release func(context.Context, string, string) error) []string {
	var bad []string
	fail := func(f string, a ...any) { bad = append(bad, fmt.Sprintf(f, a...)) }
	ta, tb, tx := fmt.Sprint("ta", time.Now().UnixNano()), fmt.Sprint("tb", time.Now().UnixNano()), "tx"
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
