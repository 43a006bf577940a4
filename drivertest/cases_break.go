package drivertest

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases for driver.Breaker.

// mustBreak calls Break through brk, failing the test on an error.
func mustBreak(t *testing.T, brk driver.Breaker, key string) driver.BrokenHolding {
	t.Helper()
	b, err := brk.Break(ctx(t), key)
	if err != nil {
		t.Fatalf("Break(%q): %v", key, err)
	}
	return b
}

// testBreak: Break (driver.Breaker), called through another client of the
// store as an operator's tool would, ends a holding with all its holds and
// reports it; the broken holder's Extend and Release answer NotHeld(taken)
// and change nothing; a Notifier's subscribers are woken; the next holding
// gets a greater fence; Break of a free key reports Held false and changes
// nothing (the next fence is still greater).
func (s *suite) testBreak(t *testing.T, m driver.Mutex) {
	brk, ok := driver.As[driver.Breaker](s.client(t))
	if !ok {
		t.Skip("store does not implement driver.Breaker")
	}
	var key, tok string
	var g driver.Grant
	var woken <-chan struct{}
	for attempt := 1; ; attempt++ {
		key, tok = Key(t), Token()
		g, woken = s.breakHolding(t, m, brk, key, tok)
		_, err := m.Extend(ctx(t), key, tok, s.long)
		if s.h.BreakForgottenBySweep && attempt < 3 && errors.Is(err, driver.ErrExpired) {
			t.Logf("attempt %d: the sweep deleted the broken holding before Extend (%v): again on a new key", attempt, err)
			continue
		}
		wantNotHeld(t, err, driver.ErrTaken)
		err = m.Release(ctx(t), key, tok)
		if s.h.BreakForgottenBySweep && attempt < 3 && errors.Is(err, driver.ErrExpired) {
			t.Logf("attempt %d: the sweep deleted the broken holding before Release (%v): again on a new key", attempt, err)
			continue
		}
		wantNotHeld(t, err, driver.ErrTaken)
		break
	}
	if woken != nil {
		select {
		case <-woken:
		case <-time.After(s.slack + time.Second):
			t.Fatalf("no notification within %v of Break", s.slack+time.Second)
		}
	}
	tok2 := Token()
	g2 := mustAcquire(t, m, key, tok2, s.long)
	if g2.Fence <= g.Fence {
		t.Fatalf("fence after Break = %d; want greater than the broken holding's %d", g2.Fence, g.Fence)
	}
	_, err := m.Extend(ctx(t), key, tok, s.long)
	wantNotHeld(t, err, driver.ErrTaken)
	mustRelease(t, m, key, tok2)
	if b := mustBreak(t, brk, key); b.Held || b.NotALock {
		t.Fatalf("Break of a released key = %+v; want Held false", b)
	}
	if g3 := mustAcquire(t, m, key, Token(), s.long); g3.Fence <= g2.Fence {
		t.Fatalf("fence after Break of a free key = %d; want greater than the last holding's %d", g3.Fence, g2.Fence)
	}
}

// breakHolding: Break of key never locked reports Held false; then key is
// held twice by tok and broken through brk, which must report that
// holding. It returns the grant and, if m is a Notifier, the channel of a
// subscription to key made before the Break.
func (s *suite) breakHolding(t *testing.T, m driver.Mutex, brk driver.Breaker, key, tok string) (driver.Grant, <-chan struct{}) {
	t.Helper()
	if b := mustBreak(t, brk, key); b.Held || b.NotALock {
		t.Fatalf("Break of a key never locked = %+v; want Held false", b)
	}
	g := mustAcquire(t, m, key, tok, s.long)
	mustAcquire(t, m, key, tok, s.long)
	var woken <-chan struct{}
	if n, ok := driver.As[driver.Notifier](m); ok {
		ch, cancel, err := n.Subscribe(ctx(t), key)
		if err == nil {
			t.Cleanup(cancel)
			woken = ch
		}
	}
	b := mustBreak(t, brk, key)
	if !b.Held || b.NotALock || b.Holds != 2 || b.Fence != g.Fence || (b.Token != tok && b.Token != "") {
		t.Fatalf("Break = {Held %v, NotALock %v, Holds %d, Fence %d, token matches %v}; want the holding of 2 holds, fence %d",
			b.Held, b.NotALock, b.Holds, b.Fence, b.Token == tok, g.Fence)
	}
	return g, woken
}
