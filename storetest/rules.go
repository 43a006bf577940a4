package storetest

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases for the expiry rules of re-entry and Extend, and for bounded
// per-key state (see driver.Mutex).

// StateReporter is an optional interface of the store under test (usually
// a test's wrapper around it) for the BoundedState case: it tells how long
// the store keeps a released key's state and how much it keeps for a key.
type StateReporter interface {
	// Retention is how long the store may keep state for a key after the
	// key was released or its lease ended.
	Retention() time.Duration
	// KeyState returns how many entries (server keys, map entries) the
	// store holds for key.
	KeyState(ctx context.Context, key string) (int, error)
}

// testReentryNeverShortens: a re-entry with a ttl shorter than what the
// holding has left keeps the longer expiry (S2 of issue 13: a nested Do with
// a short TTL must not free the outer holding early).
func testReentryNeverShortens(t *testing.T, s driver.Mutex) {
	key, tok := Key(t), Token()
	mustAcquire(t, s, key, tok, long)
	g := mustAcquire(t, s, key, tok, TTL)
	if g.Holds != 2 || g.TTL < TTL {
		t.Fatalf("re-entry grant = %+v, want holds 2 and TTL >= %v", g, TTL)
	}
	time.Sleep(TTL + Slack) // the short ttl running out is the point
	if ce := wantContended(t, s, key); ce.Remaining < long-2*Slack-TTL {
		t.Fatalf("holding has %v left after a short re-entry, want about %v", ce.Remaining, long-Slack-TTL)
	}
	// A re-entry with a longer ttl does lengthen it.
	if g := mustAcquire(t, s, key, tok, 3*long); g.Holds != 3 {
		t.Fatalf("third hold = %+v", g)
	}
	if ce := wantContended(t, s, key); ce.Remaining <= long {
		t.Fatalf("remaining %v after a longer re-entry, want > %v", ce.Remaining, long)
	}
	for range 3 {
		mustRelease(t, s, key, tok)
	}
}

// testExtendShorterShortens: the store follows the latest Extend, also a
// shorter one (S1 of issue 13, the store's side): held until just before the
// short ttl ends, free shortly after.
func testExtendShorterShortens(t *testing.T, s driver.Mutex) {
	key, tok := Key(t), Token()
	mustAcquire(t, s, key, tok, long)
	start := time.Now()
	if _, err := s.Extend(ctx(t), key, tok, 2*TTL); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if ce := wantContended(t, s, key); ce.Remaining > 2*TTL {
		t.Fatalf("remaining %v after Extend(%v)", ce.Remaining, 2*TTL)
	}
	other := Token()
	if !eventually(2*TTL+Slack, func() bool {
		_, err := s.Acquire(ctx(t), key, other, long)
		return err == nil
	}) {
		t.Fatalf("key still held %v after Extend(%v)", time.Since(start), 2*TTL)
	}
	if el := time.Since(start); el < 2*TTL-10*time.Millisecond {
		t.Fatalf("key freed %v after Extend(%v): before the ttl ended", el, 2*TTL)
	}
	mustRelease(t, s, key, other)
}

// testBoundedState: after release (or expiry) and the store's retention,
// nothing of a key is left (L7 of issue 13). Negative control: a held key
// does show state, so KeyState is not blind.
func testBoundedState(t *testing.T, s driver.Mutex) {
	r, ok := s.(StateReporter)
	if !ok {
		t.Skip("store does not report its per-key state (storetest.StateReporter)")
	}
	released, expired, held := Key(t), Key(t), Key(t)
	tok := Token()
	mustAcquire(t, s, released, tok, long)
	mustAcquire(t, s, released, tok, long)
	mustRelease(t, s, released, tok)
	mustRelease(t, s, released, tok)
	mustAcquire(t, s, expired, Token(), TTL)
	mustAcquire(t, s, held, Token(), long)
	keys := []string{released, expired}
	if tr, ok := s.(driver.Transferer); ok {
		moved, a, b := Key(t), Token(), Token()
		mustAcquire(t, s, moved, a, long)
		if _, err := tr.Transfer(ctx(t), moved, a, b, long); err != nil {
			t.Fatalf("Transfer: %v", err)
		}
		mustRelease(t, s, moved, b)
		keys = append(keys, moved)
	}
	left := func() (n int) {
		for _, k := range keys {
			c, err := r.KeyState(ctx(t), k)
			if err != nil {
				t.Fatalf("KeyState(%q): %v", k, err)
			}
			n += c
		}
		return n
	}
	if !eventually(r.Retention()+TTL+Slack, func() bool { return left() == 0 }) {
		t.Fatalf("%d entries left %v after release and expiry (retention %v)", left(), r.Retention()+TTL+Slack, r.Retention())
	}
	if n, err := r.KeyState(ctx(t), held); err != nil || n == 0 {
		t.Fatalf("KeyState of a held key = %d, %v; want some (control)", n, err)
	}
}
