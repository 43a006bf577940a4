package drivertest

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases for the rules of driver.Mutex that hold on every store, per-key or
// session-based.

// grantBound is the longest Grant.TTL or remaining time a holding taken
// with s.long may report: the lease asked for, or the session's TTL.
func (s *suite) grantBound() time.Duration {
	if s.model.Session {
		return max(s.model.SessionTTL, s.long)
	}
	return s.long
}

// testModel: Model does no I/O, returns the same value every time (also on
// another client), and is coherent.
func (s *suite) testModel(t *testing.T, m driver.Mutex) {
	md := m.Model()
	if other := s.client(t).Model(); md != other || md != m.Model() || md != s.model {
		t.Fatalf("Model() varies: %+v, %+v, run's %+v", md, other, s.model)
	}
	if md.MinTTL < 0 || md.Granularity < 0 || (md.MaxTTL != 0 && md.MaxTTL < md.MinTTL) {
		t.Fatalf("incoherent TTL bounds: %+v", md)
	}
	if md.Session != (md.SessionTTL > 0) {
		t.Fatalf("Session %v with SessionTTL %v: a session store declares its TTL, a per-key store none", md.Session, md.SessionTTL)
	}
}

// testAcquireFree: a free key is acquired with one hold, a fence and a TTL
// no longer than asked (or the session's); released, it is free again.
func (s *suite) testAcquireFree(t *testing.T, m driver.Mutex) {
	key, tok := Key(t), Token()
	g := mustAcquire(t, m, key, tok, s.long)
	if g.Holds != 1 || g.Fence == 0 || g.TTL <= 0 || g.TTL > s.grantBound() {
		t.Fatalf("grant = %+v, want holds 1, fence > 0, 0 < TTL <= %v", g, s.grantBound())
	}
	mustRelease(t, m, key, tok)
	g2 := mustAcquire(t, m, key, Token(), s.long)
	if g2.Holds != 1 {
		t.Fatalf("after release, a new owner got %+v", g2)
	}
}

// testContended: Acquire of a held key returns *ContendedError with the
// holder's remaining time (or a negative one) and changes nothing.
func (s *suite) testContended(t *testing.T, m driver.Mutex) {
	key, tok := Key(t), Token()
	mustAcquire(t, m, key, tok, s.long)
	ce := s.wantContended(t, s.client(t), key)
	if ce.Remaining == 0 {
		t.Fatalf("Remaining = 0 for a key held for %v: want its remaining time, or negative if unknown", s.long)
	}
	remainingAtMost(t, "contended", ce.Remaining, s.grantBound())
	mustRelease(t, m, key, tok) // the failed attempt changed nothing
}

// testReentry: Acquire by the holder re-enters: holds count up, the fence
// stays; the key is free only after as many releases, then the next
// holding's fence is greater.
func (s *suite) testReentry(t *testing.T, m driver.Mutex) {
	key, tok := Key(t), Token()
	g1 := mustAcquire(t, m, key, tok, s.long)
	g2 := mustAcquire(t, m, key, tok, s.long)
	if g2.Holds != 2 || g2.Fence != g1.Fence {
		t.Fatalf("re-entry grant = %+v, want holds 2 and fence %d", g2, g1.Fence)
	}
	mustRelease(t, m, key, tok)
	s.wantContended(t, m, key) // one hold left
	mustRelease(t, m, key, tok)
	g3 := mustAcquire(t, m, key, Token(), s.long)
	if g3.Fence <= g1.Fence {
		t.Fatalf("fence after full release = %d, want > %d", g3.Fence, g1.Fence)
	}
}

// testFences: every acquisition of a free key, by either of two clients,
// gets a fence strictly greater than the one before.
func (s *suite) testFences(t *testing.T, m driver.Mutex) {
	key := Key(t)
	clients := []driver.Mutex{m, s.client(t)}
	var last uint64
	for i := range 20 {
		c, tok := clients[i%2], Token()
		g := mustAcquire(t, c, key, tok, s.long)
		if g.Fence <= last {
			t.Fatalf("acquisition %d: fence %d, want > %d", i, g.Fence, last)
		}
		last = g.Fence
		mustRelease(t, c, key, tok)
	}
}

// testExtend: Extend by the holder keeps the fence and holds, and the key
// outlives the TTL it was acquired with.
func (s *suite) testExtend(t *testing.T, m driver.Mutex) {
	key, tok := Key(t), Token()
	g := mustAcquire(t, m, key, tok, s.ttl)
	e, err := m.Extend(ctx(t), key, tok, s.long)
	if err != nil || e.Fence != g.Fence || e.Holds != 1 || e.TTL <= 0 || e.TTL > s.grantBound() {
		t.Fatalf("Extend = %+v, %v; want fence %d, holds 1, 0 < TTL <= %v", e, err, g.Fence, s.grantBound())
	}
	time.Sleep(s.ttl + 50*time.Millisecond) // waiting for the original TTL to pass is the point
	s.wantContended(t, m, key)
	mustRelease(t, m, key, tok)
}

// testNonOwner: Extend and Release by a token that does not hold the key
// change nothing and return NotHeld(true); the holder is unaffected.
func (s *suite) testNonOwner(t *testing.T, m driver.Mutex) {
	key, tok := Key(t), Token()
	g := mustAcquire(t, m, key, tok, s.long)
	other := s.client(t)
	_, err := other.Extend(ctx(t), key, Token(), s.long)
	wantNotHeld(t, err, driver.ErrTaken)
	wantNotHeld(t, other.Release(ctx(t), key, Token()), driver.ErrTaken)
	ce := s.wantContended(t, other, key)
	remainingAtMost(t, "after a refused Extend", ce.Remaining, s.grantBound())
	e, err := m.Extend(ctx(t), key, tok, s.long)
	if err != nil || e.Fence != g.Fence || e.Holds != 1 {
		t.Fatalf("holder's Extend after non-owner calls = %+v, %v", e, err)
	}
	mustRelease(t, m, key, tok)
	wantNotHeld(t, m.Release(ctx(t), key, tok), driver.ErrExpired)
}

// testExtendAfterRelease: Extend never re-creates a key: after the last
// release, the former holder's Extend returns NotHeld(false) and the key
// stays free.
func (s *suite) testExtendAfterRelease(t *testing.T, m driver.Mutex) {
	key, tok := Key(t), Token()
	mustAcquire(t, m, key, tok, s.long)
	mustRelease(t, m, key, tok)
	_, err := m.Extend(ctx(t), key, tok, s.long)
	wantNotHeld(t, err, driver.ErrExpired)
	s.wantFree(t, s.client(t), key)
	_, err = m.Extend(ctx(t), Key(t), tok, s.long) // never locked
	wantNotHeld(t, err, driver.ErrExpired)
}

// testHostile: keys and tokens with quotes, script fragments, control
// characters, glob and hash-tag characters are plain names.
func (s *suite) testHostile(t *testing.T, m driver.Mutex) {
	base := Key(t)
	keys := []string{
		base + `"'; DEL *`, base + "\n\r\t", base + `") redis.call("flushall") --`,
		base + " ünï ✓", base + "*", base + "a}b{c", base + ":fence", base + "/../x",
	}
	tok := `") redis.call("flushall") --` + Token()
	for _, k := range keys {
		mustAcquire(t, m, k, tok, s.long)
	}
	for _, k := range keys {
		s.wantContended(t, m, k)
	}
	for _, k := range keys {
		mustRelease(t, m, k, tok)
	}
	mustAcquire(t, m, base, Token(), s.long) // untouched by its hostile cousins
}

// testCancelled: a call with a cancelled context fails and changes nothing
// (package driver: methods honour ctx).
func (s *suite) testCancelled(t *testing.T, m driver.Mutex) {
	key, tok := Key(t), Token()
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Acquire(c, key, tok, s.long); err == nil {
		t.Fatal("Acquire with a cancelled context succeeded")
	}
	mustAcquire(t, s.client(t), key, tok, s.long) // and changed nothing
	if err := m.Release(c, key, tok); err == nil {
		t.Fatal("Release with a cancelled context succeeded")
	}
	s.wantContended(t, m, key)
	mustRelease(t, m, key, tok)
}
