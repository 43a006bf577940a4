package drivertest

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases for driver.Notifier and driver.BatchExtender.

// quiet is how long NoSpuriousNotifications listens for a wake-up that must
// not come.
func (s *suite) quiet() time.Duration { return max(300*time.Millisecond, s.slack/2) }

func notifier(t *testing.T, m driver.Mutex) driver.Notifier {
	n, ok := driver.As[driver.Notifier](m)
	if !ok {
		t.Skip("store does not implement driver.Notifier")
	}
	return n
}

// subscribe subscribes to key on n, cancelling at the end of the test.
func subscribe(t *testing.T, n driver.Notifier, key string) <-chan struct{} {
	t.Helper()
	ch, cancel, err := n.Subscribe(ctx(t), key)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", key, err)
	}
	t.Cleanup(cancel)
	return ch
}

// testNotify: a release of a held key wakes a subscriber on another client
// within Slack.
func (s *suite) testNotify(t *testing.T, m driver.Mutex) {
	sub := s.client(t)
	n := notifier(t, sub)
	key, tok := Key(t), Token()
	mustAcquire(t, m, key, tok, s.long)
	ch := subscribe(t, n, key)
	start := time.Now()
	mustRelease(t, m, key, tok)
	select {
	case <-ch:
		t.Logf("woken %v after release", time.Since(start))
	case <-time.After(s.slack):
		t.Fatalf("no notification within %v of release", s.slack)
	}
}

// testNoSpurious: acquisitions, re-entries, extensions, a partial release,
// refused releases and extends, contended acquires and the release of
// another key send nothing (driver.Notifier: "every spurious wake-up costs
// each waiter a round trip"); then the real release does arrive (control).
func (s *suite) testNoSpurious(t *testing.T, m driver.Mutex) {
	sub := s.client(t)
	n := notifier(t, sub)
	key, other, tok := Key(t), Key(t), Token()
	ch := subscribe(t, n, key)
	mustAcquire(t, m, key, tok, s.long)
	mustAcquire(t, m, key, tok, s.long)
	if _, err := m.Extend(ctx(t), key, tok, s.long); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	mustRelease(t, m, key, tok) // one of two holds: the key stays held
	wantNotHeld(t, m.Release(ctx(t), key, Token()), driver.ErrTaken)
	_, err := m.Extend(ctx(t), key, Token(), s.long)
	wantNotHeld(t, err, driver.ErrTaken)
	s.wantContended(t, m, key)
	otherTok := Token()
	mustAcquire(t, m, other, otherTok, s.long)
	mustRelease(t, m, other, otherTok)
	select {
	case <-ch:
		t.Fatal("a notification arrived although key was never released")
	case <-time.After(s.quiet()):
	}
	start := time.Now()
	mustRelease(t, m, key, tok)
	select {
	case <-ch:
		t.Logf("real release woke the subscriber after %v", time.Since(start))
	case <-time.After(s.slack):
		t.Fatalf("no notification within %v of the real release (control)", s.slack)
	}
}

// batchItem is one item of testExtendBatch, set up twice (batch and serial).
type batchItem struct {
	name  string
	setup func(t *testing.T, key string) (token string)
	ttl   time.Duration
}

// testExtendBatch: ExtendBatch behaves like a series of Extend: for held,
// re-entered, free and taken items, same errors, grants and expiries as the
// same Extends made one by one on an identical set of keys.
func (s *suite) testExtendBatch(t *testing.T, m driver.Mutex) {
	be, ok := driver.As[driver.BatchExtender](m)
	if !ok {
		t.Skip("store does not implement driver.BatchExtender")
	}
	holder := s.client(t)
	items := []batchItem{
		{"held, longer", func(t *testing.T, k string) string { return s.mustTok(t, m, k) }, 2 * s.long},
		{"held, shorter", func(t *testing.T, k string) string { return s.mustTok(t, m, k) }, 2 * s.ttl},
		{"re-entered", func(t *testing.T, k string) string {
			tok := s.mustTok(t, m, k)
			mustAcquire(t, m, k, tok, s.long)
			return tok
		}, s.long},
		{"never locked", func(*testing.T, string) string { return Token() }, s.long},
		{"released", func(t *testing.T, k string) string {
			tok := s.mustTok(t, m, k)
			mustRelease(t, m, k, tok)
			return tok
		}, s.long},
		{"taken", func(t *testing.T, k string) string { s.mustTok(t, holder, k); return Token() }, s.long},
	}
	reqs := make([]driver.ExtendRequest, len(items))
	serial := make([]driver.ExtendResult, len(items))
	serialKeys, serialToks := make([]string, len(items)), make([]string, len(items))
	for i, it := range items {
		reqs[i] = driver.ExtendRequest{Key: Key(t), TTL: it.ttl}
		reqs[i].Token = it.setup(t, reqs[i].Key)
		serialKeys[i] = Key(t)
		serialToks[i] = it.setup(t, serialKeys[i])
	}
	for i, it := range items {
		serial[i].Grant, serial[i].Err = m.Extend(ctx(t), serialKeys[i], serialToks[i], it.ttl)
	}
	batch := be.ExtendBatch(ctx(t), reqs)
	if len(batch) != len(reqs) {
		t.Fatalf("ExtendBatch returned %d results for %d requests", len(batch), len(reqs))
	}
	for i, it := range items {
		b, e := batch[i], serial[i]
		bound := it.ttl
		if s.model.Session {
			bound = s.model.SessionTTL
		}
		if outcome(b.Err) != outcome(e.Err) || b.Grant.Holds != e.Grant.Holds || (b.Err == nil) != (b.Grant.Fence > 0) ||
			b.Grant.TTL > bound || (b.Err == nil && b.Grant.TTL <= 0) {
			t.Errorf("%s: batch %+v (%v), serial Extend %+v (%v)", it.name, b.Grant, b.Err, e.Grant, e.Err)
		}
		if !s.sameExpiry(t, m, reqs[i].Key, serialKeys[i]) {
			t.Errorf("%s: batch %+v (%v), serial Extend %+v (%v)", it.name, b.Grant, b.Err, e.Grant, e.Err)
		}
	}
}

// outcome names the class of an Extend error, for comparison.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, driver.ErrExpired):
		return "not held: expired"
	case errors.Is(err, driver.ErrTaken):
		return "not held: taken"
	}
	return "error: " + err.Error()
}

// sameExpiry reports whether two keys are in the same state: both free, or
// both held with remaining times within Slack of each other. It says what
// differs.
func (s *suite) sameExpiry(t *testing.T, m driver.Mutex, a, b string) bool {
	t.Helper()
	_, errA := m.Acquire(ctx(t), a, Token(), s.long)
	_, errB := m.Acquire(ctx(t), b, Token(), s.long)
	var ca, cb *driver.ContendedError
	heldA, heldB := errors.As(errA, &ca), errors.As(errB, &cb)
	if heldA != heldB || (!heldA && (errA != nil || errB != nil)) {
		t.Logf("after the batch Acquire says %v, after serial Extend %v", errA, errB)
		return false
	}
	if heldA && ca.Remaining >= 0 && cb.Remaining >= 0 && (ca.Remaining-cb.Remaining > s.slack || cb.Remaining-ca.Remaining > s.slack) {
		t.Logf("%v left after the batch, %v after serial Extend", ca.Remaining, cb.Remaining)
		return false
	}
	return true
}
