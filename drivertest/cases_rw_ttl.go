package drivertest

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases of the read-write lock suite about time: each holding's own expiry
// and the bounded state.

// testRWOwnExpiry: a reader that is not extended (a crashed one) ends at
// its own expiry while another reader keeps renewing its own, so it keeps
// a writer out no longer than its lease: once the renewing reader leaves,
// the writer gets in at once.
func (s *suite) testRWOwnExpiry(t *testing.T, m driver.RWMutex) {
	s.perKeyOnly(t)
	key, dead, live := Key(t), Token(), Token()
	if _, err := m.AcquireRead(ctx(t), key, dead, s.ttl); err != nil {
		t.Fatalf("AcquireRead(ttl %v): %v", s.ttl, err)
	}
	s.mustRW(t, m, key, live, driver.RWRead)
	start := time.Now()
	var g driver.RWGrant
	if !eventually(s.ttl+s.slack, func() bool {
		g = mustExtendRW(t, m, key, live, s.long) // the other reader renews all along
		return g.Readers == 1
	}) {
		t.Fatalf("a reader with a lease of %v still counted after %v while another reader renewed its own (%d readers)", s.ttl, s.ttl+s.slack, g.Readers)
	}
	t.Logf("the unrenewed reader ended after %v", time.Since(start))
	_, err := m.ExtendRW(ctx(t), key, dead, s.long)
	wantNotHeld(t, err, driver.ErrExpired)
	mustReleaseRW(t, m, key, live)
	s.mustRW(t, s.rwClient(t), key, Token(), driver.RWWrite)
}

// testRWWriteExpires: a write holding ends at its expiry, and one extended
// to a shorter ttl at that one: readers get in within ttl (plus slack).
func (s *suite) testRWWriteExpires(t *testing.T, m driver.RWMutex) {
	s.perKeyOnly(t)
	short, shortened := Key(t), Key(t)
	if _, err := m.AcquireWrite(ctx(t), short, Token(), s.ttl); err != nil {
		t.Fatalf("AcquireWrite(ttl %v): %v", s.ttl, err)
	}
	w := Token()
	s.mustRW(t, m, shortened, w, driver.RWWrite)
	mustExtendRW(t, m, shortened, w, s.ttl)
	other := s.rwClient(t)
	for _, key := range []string{short, shortened} {
		tok := Token()
		var err error
		if !eventually(s.ttl+s.slack, func() bool {
			_, err = other.AcquireRead(ctx(t), key, tok, s.long)
			return err == nil
		}) {
			t.Fatalf("a write holding of %v still kept readers out after %v: %v", s.ttl, s.ttl+s.slack, err)
		}
	}
	_, err := m.ExtendRW(ctx(t), shortened, w, s.long)
	wantNotHeld(t, err, driver.ErrExpired)
}

// testRWKilledSession: on a session-based store, the holdings of a client
// that is killed (no release, no renewal) end within its session's TTL:
// its write holding lets readers in, and its read holding stops keeping a
// writer out once the renewed reader beside it leaves.
func (s *suite) testRWKilledSession(t *testing.T, m driver.RWMutex) {
	s.sessionOnly(t)
	read, write, kept := Key(t), Key(t), Token()
	other := s.rwClient(t)
	s.mustRW(t, m, read, Token(), driver.RWRead)
	s.mustRW(t, other, read, kept, driver.RWRead)
	s.mustRW(t, m, write, Token(), driver.RWWrite)
	start := time.Now()
	s.kill(t, m)
	s.wantRWTaken(t, other, write, driver.RWRead, driver.RWWrite)
	var g driver.RWGrant
	if !eventually(s.model.SessionTTL+s.slack, func() bool {
		g = mustExtendRW(t, other, read, kept, s.long)
		return g.Readers == 1
	}) {
		t.Fatalf("the killed client's reader still counted %v after (session TTL %v): %d readers", time.Since(start), s.model.SessionTTL, g.Readers)
	}
	mustReleaseRW(t, other, read, kept)
	s.mustRW(t, other, read, Token(), driver.RWWrite)
	tok := Token()
	var err error
	if !eventually(s.model.SessionTTL+s.slack-time.Since(start), func() bool {
		_, err = other.AcquireRead(ctx(t), write, tok, s.long)
		return err == nil
	}) {
		t.Fatalf("the killed client's write holding still kept readers out %v after (session TTL %v): %v", time.Since(start), s.model.SessionTTL, err)
	}
	t.Logf("the killed client's holdings ended within %v", time.Since(start))
}

// testRWBoundedState: a released key, one whose holding expired and one
// left with only a writer-waiting mark keep no state once the store's
// retention (and the mark's WriterWaitTTL) has passed.
func (s *suite) testRWBoundedState(t *testing.T, m driver.RWMutex) {
	r, ok := driver.As[StateReporter](m)
	if !ok {
		t.Skip("store does not report its per-key state (drivertest.StateReporter)")
	}
	released, marked, held := Key(t), Key(t), Key(t)
	a, b, w := Token(), Token(), Token()
	s.mustRW(t, m, released, a, driver.RWRead)
	s.mustRW(t, m, released, b, driver.RWRead)
	mustReleaseRW(t, m, released, a)
	mustReleaseRW(t, m, released, b)
	mustReleaseRW(t, m, released, s.tookRW(t, m, released, driver.RWWrite))
	s.mustRW(t, m, marked, a, driver.RWRead)
	if _, err := m.AcquireWrite(ctx(t), marked, w, s.long); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("AcquireWrite with a reader: %v", err)
	}
	mustReleaseRW(t, m, marked, a)
	s.mustRW(t, m, held, Token(), driver.RWRead)
	keys := []string{released, marked}
	if !s.model.Session {
		expired := Key(t)
		if _, err := m.AcquireWrite(ctx(t), expired, Token(), s.ttl); err != nil {
			t.Fatalf("AcquireWrite: %v", err)
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
	if n, err := r.KeyState(ctx(t), marked); err != nil || n == 0 {
		t.Fatalf("KeyState of a key with a live mark = %d, %v; want some (control)", n, err)
	}
	if !eventually(r.Retention()+driver.WriterWaitTTL+s.ttl+s.slack, func() bool { return left() == 0 }) {
		t.Fatalf("%d entries left for keys released, expired or marked more than %v (retention) + %v (the mark) ago", left(), r.Retention(), driver.WriterWaitTTL)
	}
}
