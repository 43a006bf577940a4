package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/etcdstore"
	"example.com/dlock/etcdstore/internal/etcdtest"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/faulttest"
)

// The dlock Client with no options over etcdstore: its defaults must follow
// the store's Model (the session TTL), not the per-key DefaultLease.

// shortSession is the session TTL of these tests: etcd's minimum, so that
// three TTLs pass quickly.
const shortSession = 2 * time.Second

// holdFor watches l for d (polling every 100 ms, a test of elapsed time,
// not synchronisation) and returns the first moment the key is not seen
// held by l's fence from another store, or the zero time if it always is.
func holdFor(t *testing.T, ctx context.Context, l *dlock.Lease, other *etcdstore.Store, d time.Duration) time.Time {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); {
		select {
		case <-l.Done():
			return time.Now()
		case <-tick.C:
		}
		in, err := other.Inspect(ctx, "k")
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		if !in.Held || in.Fence != l.Fence() {
			return time.Now()
		}
	}
	return time.Time{}
}

// TestClientDefaultsRenewTheSession: a Client with no options holds a lock
// on a 2 s session for 3.5 session TTLs, seen held (same fence) from
// another store throughout, because its renewal follows Model.SessionTTL.
// Negative control: WithTTL (no renewal) on the same store loses the key
// within that time.
func TestClientDefaultsRenewTheSession(t *testing.T) {
	c := node(t)
	for _, renew := range []bool{true, false} {
		pfx := uniq(t)
		s, _ := newStore(t, c, pfx, shortSession)
		other, _ := newStore(t, c, pfx, shortSession)
		var opts []dlock.Option
		if !renew {
			opts = append(opts, dlock.WithTTL(shortSession))
		}
		dc, err := dlock.New(s, opts...)
		if err != nil {
			t.Fatal(err)
		}
		faulttest.CloseOnCleanup(t, dc)
		ctx := ctxT(t, 30*time.Second)
		start := time.Now()
		l, err := dc.Lock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		lostAt := holdFor(t, ctx, l, other, 7*shortSession/2)
		switch {
		case renew && !lostAt.IsZero():
			t.Fatalf("default client lost the key %v after acquiring (session %v)", lostAt.Sub(start), shortSession)
		case !renew && lostAt.IsZero():
			t.Fatalf("negative control: WithTTL kept the key for %v without renewal", 7*shortSession/2)
		}
		if renew {
			if err := l.Release(ctx); err != nil {
				t.Fatalf("release: %v", err)
			}
			if in, err := other.Inspect(ctx, "k"); err != nil || in.Held {
				t.Fatalf("after release: %+v %v", in, err)
			}
		}
	}
}

// TestClientDefaultsTryLockWaitReentryDo: with no options, TryLock of a
// held key fails at once with a ContendedError, Lock WithWait gives up
// within its bound, an Owner re-enters (holds seen by Inspect) and must
// release each hold, and Do runs fn under the lock with a nested Do that
// re-enters.
func TestClientDefaultsTryLockWaitReentryDo(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	s1, _ := newStore(t, c, pfx, shortSession)
	s2, _ := newStore(t, c, pfx, shortSession)
	a, err := dlock.New(s1)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, a)
	b, err := dlock.New(s2)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, b)
	ctx := ctxT(t, 30*time.Second)
	owned := dlock.ContextWithOwner(ctx, dlock.NewOwner())
	l1, err := a.Lock(owned, "k")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := a.Lock(owned, "k")
	if err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	if in, err := s2.Inspect(ctx, "k"); err != nil || in.Holds != 2 || in.Fence != l1.Fence() {
		t.Fatalf("after re-entry: %+v %v (fence %d)", in, err, l1.Fence())
	}
	var ce *dlock.ContendedError
	if _, err := b.TryLock(ctx, "k"); !errors.As(err, &ce) || !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held key: %v", err)
	}
	const bound = 700 * time.Millisecond
	start := time.Now()
	_, err = b.Lock(ctx, "k", dlock.WithWait(bound))
	if el := time.Since(start); !errors.Is(err, dlock.ErrNotAcquired) || el < bound || el > bound+3*time.Second {
		t.Fatalf("Lock WithWait(%v): %v after %v", bound, err, el)
	}
	checkReleaseEachHold(t, ctx, s2, l1, l2)
	runNestedDo(t, ctx, b, s1, l1.Fence())
}

// checkReleaseEachHold releases l2 (the key stays held, one hold) and then
// l1 (free).
func checkReleaseEachHold(t *testing.T, ctx context.Context, s *etcdstore.Store, l1, l2 *dlock.Lease) {
	t.Helper()
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if in, err := s.Inspect(ctx, "k"); err != nil || !in.Held || in.Holds != 1 {
		t.Fatalf("after releasing one of two holds: %+v %v", in, err)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if in, err := s.Inspect(ctx, "k"); err != nil || in.Held {
		t.Fatalf("after releasing both holds: %+v %v", in, err)
	}
}

// runNestedDo runs Do on dc with a nested Do on the same key, checks both
// ran under a fence above prev, seen held from s, and that the key is free
// afterwards.
func runNestedDo(t *testing.T, ctx context.Context, dc *dlock.Client, s *etcdstore.Store, prev uint64) {
	t.Helper()
	ran := 0
	err := dc.Do(ctx, "k", func(ctx context.Context) error {
		outer, _ := dlock.LeaseFromContext(ctx)
		if outer == nil || outer.Fence() <= prev {
			return errors.New("no lease in fn's context, or its fence did not grow")
		}
		return dc.Do(ctx, "k", func(ctx context.Context) error {
			in, err := s.Inspect(ctx, "k")
			if err != nil || in.Holds != 2 || in.Fence != outer.Fence() {
				return errors.New("nested Do did not re-enter the outer holding")
			}
			ran++
			return nil
		})
	})
	if err != nil || ran != 1 {
		t.Fatalf("Do: %v (nested fn ran %d times)", err, ran)
	}
	if in, err := s.Inspect(ctx, "k"); err != nil || in.Held {
		t.Fatalf("after Do: %+v %v", in, err)
	}
}

// TestClientDefaultsLostSignal: the keepalives of a default Client stop
// reaching etcd (everything to the server blackholed by a proxy); the
// Lease reports ErrLost before the server frees the key (seen by a watch
// from a direct client), and within a session TTL plus slack of the cut.
func TestClientDefaultsLostSignal(t *testing.T) {
	c := node(t)
	p, err := faultproxy.New(c.Members[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	pfx := uniq(t)
	s, err := etcdstore.New(etcdtest.NewClient(t, p.Addr()), etcdstore.Options{Prefix: pfx, SessionTTL: shortSession})
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dlock.New(s)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, dc)
	ctx := ctxT(t, 30*time.Second)
	watcher := c.Client(t)
	l, freed := lockKeyAndWatch(t, ctx, dc, "k", watcher, pfx+"k/")
	cut := time.Now()
	p.Blackhole(faultproxy.Upstream, true)
	var lostAt time.Time
	select {
	case <-l.Done():
		lostAt = time.Now()
	case <-ctx.Done():
		t.Fatal("the lease never reported its loss")
	}
	if !errors.Is(l.Err(), dlock.ErrLost) {
		t.Fatalf("lease error %v, want ErrLost", l.Err())
	}
	freedAt := <-freed
	p.Clear()
	t.Logf("lost %v after the cut, %v before the server freed the key", lostAt.Sub(cut), freedAt.Sub(lostAt))
	if freedAt.IsZero() || !lostAt.Before(freedAt) || lostAt.Sub(cut) > shortSession+time.Second {
		t.Fatalf("lost at +%v, freed at %v (cut %v)", lostAt.Sub(cut), freedAt, cut)
	}
}
