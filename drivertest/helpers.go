package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Key returns a key unique to this test run, named after the test.
func Key(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return t.Name() + "/" + hex.EncodeToString(b[:])
}

// Token returns a fresh owner token.
func Token() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ctx returns a context that ends with the test, or after a minute.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func mustAcquire(t *testing.T, s driver.Mutex, key, token string, ttl time.Duration) driver.Grant {
	t.Helper()
	g, err := s.Acquire(ctx(t), key, token, ttl)
	if err != nil {
		t.Fatalf("Acquire(%q, %v): %v", key, ttl, err)
	}
	return g
}

func mustRelease(t *testing.T, s driver.Mutex, key, token string) {
	t.Helper()
	if err := s.Release(ctx(t), key, token); err != nil {
		t.Fatalf("Release(%q): %v", key, err)
	}
}

// mustTok acquires key with a fresh token and returns it.
func (s *suite) mustTok(t *testing.T, m driver.Mutex, key string) string {
	t.Helper()
	tok := Token()
	mustAcquire(t, m, key, tok, s.long)
	return tok
}

// wantContended asserts that a fresh token cannot acquire key because
// another holds it, and that the failed attempt reports a sane Remaining.
func (s *suite) wantContended(t *testing.T, m driver.Mutex, key string) *driver.ContendedError {
	t.Helper()
	_, err := m.Acquire(ctx(t), key, Token(), s.long)
	var ce *driver.ContendedError
	if !errors.As(err, &ce) || !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("Acquire(%q) by another token: got %v, want *ContendedError matching ErrNotAcquired", key, err)
	}
	return ce
}

// wantFree asserts that key is free: a fresh token acquires it (and then
// releases it).
func (s *suite) wantFree(t *testing.T, m driver.Mutex, key string) {
	t.Helper()
	tok := Token()
	if _, err := m.Acquire(ctx(t), key, tok, s.long); err != nil {
		t.Fatalf("Acquire(%q) of a key that should be free: %v", key, err)
	}
	mustRelease(t, m, key, tok)
}

func wantNotHeld(t *testing.T, err, cause error) {
	t.Helper()
	if !errors.Is(err, driver.ErrNotHeld) || !errors.Is(err, cause) {
		t.Fatalf("got %v, want ErrNotHeld with cause %v", err, cause)
	}
}

// remainingAtMost fails if a reported remaining time exceeds limit. A
// negative value means the store does not know, which the contract allows.
func remainingAtMost(t *testing.T, what string, got, limit time.Duration) {
	t.Helper()
	if got > limit {
		t.Fatalf("%s: remaining %v, want at most %v (or negative: unknown)", what, got, limit)
	}
}

// eventually polls cond every 5 ms until it holds or d elapses.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

// acquiredWithin polls until a fresh token acquires key or d elapses, and
// returns the token ("" if it never did).
func (s *suite) acquiredWithin(t *testing.T, m driver.Mutex, key string, d time.Duration) string {
	t.Helper()
	tok := Token()
	var last error
	if eventually(d, func() bool {
		_, last = m.Acquire(ctx(t), key, tok, s.long)
		return last == nil
	}) {
		return tok
	}
	if !errors.Is(last, driver.ErrNotAcquired) {
		t.Fatalf("Acquire(%q) while polling: %v", key, last)
	}
	return ""
}

// contextWithCancel returns a cancellable context, cancelled at the latest
// when the test ends.
func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return c, cancel
}
