package drivertest

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases of the semaphore suite about time (each holding's own expiry) and
// the optional capabilities (StateReporter, PermitNotifier,
// PermitInspector).

// perKeyOnly skips a timed case on a session-based store, whose holdings
// last as long as the session.
func (s *suite) perKeyOnly(t *testing.T) {
	if s.model.Session {
		t.Skip("session-based store: holdings last as long as the session")
	}
}

// sessionOnly skips a case about sessions on a store whose holdings have
// leases of their own, and one whose harness cannot end a session.
func (s *suite) sessionOnly(t *testing.T) {
	if !s.model.Session {
		t.Skip("per-key store: each holding's own expiry is checked instead")
	}
	if s.h.Kill == nil {
		t.Skip("Harness.Kill not set: cannot end a session")
	}
}

// testSemKilledSession: on a session-based store, the permits of a client
// that is killed (no release, no renewal) come back within its session's
// TTL while another holder keeps renewing its own, which still counts.
func (s *suite) testSemKilledSession(t *testing.T, m driver.Semaphore) {
	s.sessionOnly(t)
	key := Key(t)
	other := s.semClient(t)
	mustPermits(t, m, key, Token(), 3, 2, s)
	kept := Token()
	mustPermits(t, other, key, kept, 3, 1, s)
	start := time.Now()
	s.kill(t, m)
	s.wantTaken(t, other, key, 3, 1, 3)
	tok := s.permitsFreedWithin(t, s.semClient(t), key, 3, s.model.SessionTTL+s.slack, func() {
		mustExtendPermits(t, other, key, kept, s.long)
	})
	if tok == "" {
		t.Fatalf("the permits of a killed client still counted %v after (session TTL %v)", time.Since(start), s.model.SessionTTL)
	}
	t.Logf("the killed client's permits came back after %v", time.Since(start))
	mustPermits(t, other, key, Token(), 3, 1, s) // 2 came back
	s.wantTaken(t, other, key, 3, 1, 3)          // the renewed holding still counts
}

// permitsFreedWithin polls until a fresh token takes one of key's permits
// (limit n) or d elapses, running between tries, and returns the token (""
// if it never did).
func (s *suite) permitsFreedWithin(t *testing.T, m driver.Semaphore, key string, n int, d time.Duration, between func()) string {
	t.Helper()
	tok := Token()
	var last error
	if eventually(d, func() bool {
		between()
		_, last = m.AcquirePermits(ctx(t), key, tok, n, 1, s.long)
		return last == nil
	}) {
		return tok
	}
	if !errors.Is(last, driver.ErrNotAcquired) {
		t.Fatalf("AcquirePermits(%q) while polling: %v", key, last)
	}
	return ""
}

// mustExtendPermits extends token's holding, failing the test if it is not
// held.
func mustExtendPermits(t *testing.T, m driver.Semaphore, key, tok string, ttl time.Duration) driver.PermitGrant {
	t.Helper()
	g, err := m.ExtendPermits(ctx(t), key, tok, ttl)
	if err != nil {
		t.Fatalf("ExtendPermits(%q, %v): %v", key, ttl, err)
	}
	return g
}

// testSemOwnExpiry: a holding that is not extended ends at its own expiry
// while another holder keeps renewing its own, and only its permits come
// back.
func (s *suite) testSemOwnExpiry(t *testing.T, m driver.Semaphore) {
	s.perKeyOnly(t)
	key, short, renewed := s.semTwoHoldings(t, m)
	start := time.Now()
	other := s.semClient(t)
	tok := s.permitsFreedWithin(t, other, key, 2, s.ttl+s.slack, func() {
		mustExtendPermits(t, m, key, renewed, s.long) // the other holder renews all along
	})
	if tok == "" {
		t.Fatalf("the permit of a holding of %v did not come back within %v while another holder renewed its own", s.ttl, s.ttl+s.slack)
	}
	t.Logf("the expired holding's permit came back after %v", time.Since(start))
	mustExtendPermits(t, m, key, renewed, s.long)
	s.wantTaken(t, m, key, 2, 1, 2) // the renewed holding still counts
	_, err := m.ExtendPermits(ctx(t), key, short, s.long)
	wantNotHeld(t, err, driver.ErrExpired)
}

// semTwoHoldings takes one permit of 2 on a new key with a long lease
// (renewed) and one with the short ttl (short), and checks that both count.
// A probe that finds a permit free although the short lease may have run
// out by then (at least ttl since it was asked for: a stalled machine) is
// no finding: the pair is taken again on a new key, at most 3 times.
func (s *suite) semTwoHoldings(t *testing.T, m driver.Semaphore) (key, short, renewed string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		key, short, renewed = Key(t), Token(), Token()
		mustPermits(t, m, key, renewed, 2, 1, s)
		start := time.Now()
		if _, err := m.AcquirePermits(ctx(t), key, short, 2, 1, s.ttl); err != nil {
			t.Fatalf("AcquirePermits(ttl %v): %v", s.ttl, err)
		}
		_, err := m.AcquirePermits(ctx(t), key, Token(), 2, 1, s.long)
		if took := time.Since(start); err == nil && took >= s.ttl && attempt < 3 {
			t.Logf("attempt %d: the probe came %v after the %v holding was asked for: again", attempt, took, s.ttl)
			continue
		}
		pe := takenError(t, err, key, 2, 1, 2)
		remainingAtMost(t, "PermitsTakenError", pe.Remaining, s.ttl)
		return key, short, renewed
	}
}

// testSemExtendOnlyOwn: extending one holding keeps it alive and leaves the
// others to their own expiry.
func (s *suite) testSemExtendOnlyOwn(t *testing.T, m driver.Semaphore) {
	s.perKeyOnly(t)
	key, kept, left := Key(t), Token(), Token()
	for _, tok := range []string{kept, left} {
		if _, err := m.AcquirePermits(ctx(t), key, tok, 2, 1, s.ttl); err != nil {
			t.Fatalf("AcquirePermits(ttl %v): %v", s.ttl, err)
		}
	}
	if g := mustExtendPermits(t, m, key, kept, s.long); g.Used != 2 || g.Permits != 1 {
		t.Fatalf("ExtendPermits = %+v, want Used 2, Permits 1", g)
	}
	tok := s.permitsFreedWithin(t, s.semClient(t), key, 2, s.ttl+s.slack, func() {})
	if tok == "" {
		t.Fatalf("the holding left to expire still counted %v after its ttl of %v, while another was extended", s.slack, s.ttl)
	}
	mustExtendPermits(t, m, key, kept, s.long)
	s.wantTaken(t, m, key, 2, 1, 2)
}

// testSemExtendShorter: ExtendPermits with a shorter ttl than the holding
// has left shortens it: the store follows the latest call.
func (s *suite) testSemExtendShorter(t *testing.T, m driver.Semaphore) {
	s.perKeyOnly(t)
	key, a := Key(t), Token()
	mustPermits(t, m, key, a, 1, 1, s)
	mustExtendPermits(t, m, key, a, s.ttl)
	if s.permitsFreedWithin(t, m, key, 1, s.ttl+s.slack, func() {}) == "" {
		t.Fatalf("a holding extended to %v (from %v) did not end within %v", s.ttl, s.long, s.ttl+s.slack)
	}
}

// testSemBoundedState: a released key, and one whose only holding
// expired, keep no state once the store's retention has passed.
func (s *suite) testSemBoundedState(t *testing.T, m driver.Semaphore) {
	r, ok := driver.As[StateReporter](m)
	if !ok {
		t.Skip("store does not report its per-key state (drivertest.StateReporter)")
	}
	released, held, a, b := Key(t), Key(t), Token(), Token()
	mustPermits(t, m, released, a, 3, 2, s)
	mustPermits(t, m, released, b, 3, 1, s)
	mustReleasePermits(t, m, released, a)
	mustReleasePermits(t, m, released, b)
	mustPermits(t, m, held, Token(), 2, 1, s)
	keys := []string{released}
	if !s.model.Session {
		expired := Key(t)
		if _, err := m.AcquirePermits(ctx(t), expired, Token(), 2, 2, s.ttl); err != nil {
			t.Fatalf("AcquirePermits: %v", err)
		}
		keys = append(keys, expired)
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
		t.Fatalf("%d entries left for keys released or expired more than %v (retention) ago", left(), r.Retention())
	}
}
