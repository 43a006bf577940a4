package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases for the time model: per-key expiry (skipped on session-based
// stores), sessions, unavailability and bounded per-key state.

// early is how much sooner than its lease a key may be seen free: the
// store's clock and ours start the lease at slightly different moments.
const early = 10 * time.Millisecond

// testExpiry: a key whose lease ends is freed, not before the lease ends and
// within Slack after.
func (s *suite) testExpiry(t *testing.T, m driver.Mutex) {
	key := Key(t)
	start := time.Now()
	mustAcquire(t, m, key, Token(), s.ttl)
	s.wantContended(t, m, key)
	if s.acquiredWithin(t, s.client(t), key, s.ttl+s.slack) == "" {
		t.Fatalf("key still held %v after a %v lease", time.Since(start), s.ttl)
	}
	if el := time.Since(start); el < s.ttl-early {
		t.Fatalf("key freed after %v, before its %v lease ended", el, s.ttl)
	}
}

// testExpiredHolder: once a lease ended and another token took the key,
// the former holder's Extend and Release return NotHeld(true) and change
// nothing.
func (s *suite) testExpiredHolder(t *testing.T, m driver.Mutex) {
	key, old := Key(t), Token()
	mustAcquire(t, m, key, old, s.ttl)
	next := s.acquiredWithin(t, m, key, s.ttl+s.slack)
	if next == "" {
		t.Fatal("lease did not expire")
	}
	wantNotHeld(t, m.Release(ctx(t), key, old), driver.ErrTaken)
	_, err := m.Extend(ctx(t), key, old, s.long)
	wantNotHeld(t, err, driver.ErrTaken)
	s.wantContended(t, m, key) // the next holder still holds it
	mustRelease(t, m, key, next)
}

// testExtendNoRecreate: Extend never re-creates a key whose lease ended.
func (s *suite) testExtendNoRecreate(t *testing.T, m driver.Mutex) {
	key, tok := Key(t), Token()
	mustAcquire(t, m, key, tok, s.ttl)
	time.Sleep(s.ttl + 50*time.Millisecond) // letting the lease run out is the point
	_, err := m.Extend(ctx(t), key, tok, s.long)
	wantNotHeld(t, err, driver.ErrExpired)
	wantNotHeld(t, m.Release(ctx(t), key, tok), driver.ErrExpired)
	mustAcquire(t, s.client(t), key, Token(), s.long) // free, not re-created by Extend
}

// testReentryNeverShortens: a re-entry with a ttl shorter than what the
// holding has left keeps the longer expiry; a longer one lengthens it.
func (s *suite) testReentryNeverShortens(t *testing.T, m driver.Mutex) {
	key, tok := Key(t), Token()
	mustAcquire(t, m, key, tok, s.long)
	g := mustAcquire(t, m, key, tok, s.ttl)
	if g.Holds != 2 || g.TTL < s.ttl {
		t.Fatalf("re-entry grant = %+v, want holds 2 and TTL >= %v", g, s.ttl)
	}
	time.Sleep(s.ttl + s.slack) // the short ttl running out is the point
	if ce := s.wantContended(t, m, key); ce.Remaining >= 0 && ce.Remaining < s.long-2*s.slack-s.ttl {
		t.Fatalf("holding has %v left after a short re-entry, want about %v", ce.Remaining, s.long-s.slack-s.ttl)
	}
	if g := mustAcquire(t, m, key, tok, 3*s.long); g.Holds != 3 {
		t.Fatalf("third hold = %+v", g)
	}
	if ce := s.wantContended(t, m, key); ce.Remaining >= 0 && ce.Remaining <= s.long {
		t.Fatalf("remaining %v after a longer re-entry, want > %v", ce.Remaining, s.long)
	}
	for range 3 {
		mustRelease(t, m, key, tok)
	}
}

// testExtendShorterShortens: the store follows the latest Extend, also a
// shorter one: held until just before the short ttl ends, free shortly after.
func (s *suite) testExtendShorterShortens(t *testing.T, m driver.Mutex) {
	key, tok := Key(t), Token()
	mustAcquire(t, m, key, tok, s.long)
	start := time.Now()
	if _, err := m.Extend(ctx(t), key, tok, 2*s.ttl); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	remainingAtMost(t, "after a shorter Extend", s.wantContended(t, m, key).Remaining, 2*s.ttl)
	if s.acquiredWithin(t, s.client(t), key, 2*s.ttl+s.slack) == "" {
		t.Fatalf("key still held %v after Extend(%v)", time.Since(start), 2*s.ttl)
	}
	if el := time.Since(start); el < 2*s.ttl-early {
		t.Fatalf("key freed %v after Extend(%v): before the ttl ended", el, 2*s.ttl)
	}
}

// testSessionExtend: on a session-based store Extend renews the session and
// confirms the key: same fence and holds, a TTL within the session's; three
// Extends half a session apart keep the key past the session's TTL. The
// harness's KeepAlive is stopped for m: Extend alone must renew.
func (s *suite) testSessionExtend(t *testing.T, m driver.Mutex) {
	s.stopRenewal(t, m)
	key, tok := Key(t), Token()
	g := mustAcquire(t, m, key, tok, s.long)
	for range 3 {
		time.Sleep(s.model.SessionTTL / 2) // letting the session age is the point
		e, err := m.Extend(ctx(t), key, tok, s.long)
		if err != nil || e.Fence != g.Fence || e.Holds != 1 || e.TTL <= 0 || e.TTL > s.model.SessionTTL {
			t.Fatalf("Extend = %+v, %v; want fence %d, holds 1, 0 < TTL <= %v", e, err, g.Fence, s.model.SessionTTL)
		}
	}
	s.wantContended(t, s.client(t), key)
	mustRelease(t, m, key, tok)
}

// testKilledSession: the keys of a client that dies (Harness.Kill) are freed
// once its session ends: within SessionTTL + Slack, and not at once.
func (s *suite) testKilledSession(t *testing.T, m driver.Mutex) {
	if s.h.Kill == nil {
		t.Skip("Harness.Kill not set: cannot end a session")
	}
	keys := []string{Key(t), Key(t)}
	for _, k := range keys {
		mustAcquire(t, m, k, Token(), s.long)
	}
	start := time.Now()
	s.kill(t, m)
	other := s.client(t)
	s.wantContended(t, other, keys[0])
	for _, k := range keys {
		if s.acquiredWithin(t, other, k, s.model.SessionTTL+s.slack-time.Since(start)) == "" {
			t.Fatalf("%q still held %v after its client was killed (session TTL %v)", k, time.Since(start), s.model.SessionTTL)
		}
	}
}

// testUnavailable: while the server is unavailable no call gives a definite
// answer (no ErrNotHeld, no ErrNotAcquired: package driver, "a definite
// answer is a true one"), every call returns soon after its context ends
// ("methods honour ctx"), and the holding survives a short outage.
func (s *suite) testUnavailable(t *testing.T, m driver.Mutex) {
	if s.h.Pause == nil {
		t.Skip("Harness.Pause not set")
	}
	key, tok := Key(t), Token()
	g := mustAcquire(t, m, key, tok, s.long)
	resume := s.h.Pause(t)
	resumed := false
	defer func() {
		if !resumed {
			resume()
		}
	}()
	calls := map[string]func(context.Context) error{
		"Acquire by another": func(c context.Context) error { _, err := m.Acquire(c, key, Token(), s.long); return err },
		"Extend by another":  func(c context.Context) error { _, err := m.Extend(c, key, Token(), s.long); return err },
		"Extend by holder":   func(c context.Context) error { _, err := m.Extend(c, key, tok, s.long); return err },
	}
	const callTimeout = 200 * time.Millisecond
	for name, call := range calls {
		c, cancel := context.WithTimeout(context.Background(), callTimeout)
		start := time.Now()
		err := call(c)
		el := time.Since(start)
		cancel()
		if err == nil || errors.Is(err, driver.ErrNotHeld) || errors.Is(err, driver.ErrNotAcquired) {
			t.Errorf("%s while the server is unavailable: %v; want an error that is no definite answer", name, err)
		}
		if el > callTimeout+s.slack {
			t.Errorf("%s returned %v after its %v context ended: methods honour ctx", name, el-callTimeout, callTimeout)
		}
	}
	resume()
	resumed = true
	var e driver.Grant
	var err error
	if !eventually(s.slack+5*time.Second, func() bool { e, err = m.Extend(ctx(t), key, tok, s.long); return err == nil }) {
		t.Fatalf("holder's Extend after the outage: %v", err)
	}
	if e.Fence != g.Fence {
		t.Fatalf("fence after the outage = %d, want %d", e.Fence, g.Fence)
	}
	mustRelease(t, m, key, tok)
}

// testBoundedState: after release (or expiry) and the store's retention,
// nothing of a key is left. Control: a held key does show state, so
// KeyState is not blind.
func (s *suite) testBoundedState(t *testing.T, m driver.Mutex) {
	r, ok := driver.As[StateReporter](m)
	if !ok {
		t.Skip("store does not report its per-key state (drivertest.StateReporter)")
	}
	released, held := Key(t), Key(t)
	tok := Token()
	mustAcquire(t, m, released, tok, s.long)
	mustAcquire(t, m, released, tok, s.long)
	mustRelease(t, m, released, tok)
	mustRelease(t, m, released, tok)
	mustAcquire(t, m, held, Token(), s.long)
	keys := []string{released}
	if !s.model.Session {
		expired := Key(t)
		mustAcquire(t, m, expired, Token(), s.ttl)
		keys = append(keys, expired)
	}
	if tr, ok := driver.As[driver.Transferer](m); ok {
		moved, a, b := Key(t), Token(), Token()
		mustAcquire(t, m, moved, a, s.long)
		if _, err := tr.Transfer(ctx(t), moved, a, b, s.long); err != nil {
			t.Fatalf("Transfer: %v", err)
		}
		mustRelease(t, m, moved, b)
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
	if n, err := r.KeyState(ctx(t), held); err != nil || n == 0 {
		t.Fatalf("KeyState of a held key = %d, %v; want some (control)", n, err)
	}
	if !eventually(r.Retention()+s.ttl+s.slack, func() bool { return left() == 0 }) {
		t.Fatalf("%d entries left %v after release and expiry (retention %v)", left(), r.Retention()+s.ttl+s.slack, r.Retention())
	}
}
