package storetest

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/driver"
)

func testAcquireFree(t *testing.T, s driver.Mutex) {
	key, tok := Key(t), Token()
	g := mustAcquire(t, s, key, tok, long)
	if g.Holds != 1 || g.Fence == 0 || g.TTL <= 0 || g.TTL > long {
		t.Fatalf("grant = %+v, want holds 1, fence > 0, 0 < TTL <= %v", g, long)
	}
	mustRelease(t, s, key, tok)
	g2 := mustAcquire(t, s, key, Token(), long)
	if g2.Holds != 1 {
		t.Fatalf("after release, a new owner got %+v", g2)
	}
}

func testContended(t *testing.T, s driver.Mutex) {
	key, tok := Key(t), Token()
	mustAcquire(t, s, key, tok, long)
	ce := wantContended(t, s, key)
	if ce.Remaining <= 0 || ce.Remaining > long {
		t.Fatalf("Remaining = %v, want in (0, %v]", ce.Remaining, long)
	}
	mustRelease(t, s, key, tok) // the failed attempt changed nothing
}

func testReentry(t *testing.T, s driver.Mutex) {
	key, tok := Key(t), Token()
	g1 := mustAcquire(t, s, key, tok, long)
	g2 := mustAcquire(t, s, key, tok, long)
	if g2.Holds != 2 || g2.Fence != g1.Fence {
		t.Fatalf("re-entry grant = %+v, want holds 2 and fence %d", g2, g1.Fence)
	}
	mustRelease(t, s, key, tok)
	wantContended(t, s, key) // one hold left
	mustRelease(t, s, key, tok)
	g3 := mustAcquire(t, s, key, Token(), long)
	if g3.Fence <= g1.Fence {
		t.Fatalf("fence after full release = %d, want > %d", g3.Fence, g1.Fence)
	}
}

func testFences(t *testing.T, s driver.Mutex) {
	key := Key(t)
	var last uint64
	for i := 0; i < 20; i++ {
		tok := Token()
		g := mustAcquire(t, s, key, tok, long)
		if g.Fence <= last {
			t.Fatalf("acquisition %d: fence %d, want > %d", i, g.Fence, last)
		}
		last = g.Fence
		mustRelease(t, s, key, tok)
	}
}

func testExtend(t *testing.T, s driver.Mutex) {
	key, tok := Key(t), Token()
	g := mustAcquire(t, s, key, tok, TTL)
	// Extend well past the short TTL, then check the key outlives it.
	e, err := s.Extend(ctx(t), key, tok, long)
	if err != nil || e.Fence != g.Fence || e.Holds != 1 {
		t.Fatalf("Extend = %+v, %v; want fence %d, holds 1", e, err, g.Fence)
	}
	time.Sleep(TTL + 50*time.Millisecond) // waiting for the original TTL to pass is the point
	wantContended(t, s, key)
	mustRelease(t, s, key, tok)
}

func testNonOwner(t *testing.T, s driver.Mutex) {
	key, tok := Key(t), Token()
	g := mustAcquire(t, s, key, tok, long)
	_, err := s.Extend(ctx(t), key, Token(), long)
	wantNotHeld(t, err, driver.ErrTaken)
	wantNotHeld(t, s.Release(ctx(t), key, Token()), driver.ErrTaken)
	ce := wantContended(t, s, key)
	if ce.Remaining > long {
		t.Fatalf("remaining %v grew", ce.Remaining)
	}
	e, err := s.Extend(ctx(t), key, tok, long)
	if err != nil || e.Fence != g.Fence || e.Holds != 1 {
		t.Fatalf("holder's Extend after non-owner calls = %+v, %v", e, err)
	}
	mustRelease(t, s, key, tok)
	wantNotHeld(t, s.Release(ctx(t), key, tok), driver.ErrExpired)
}

func testExpiry(t *testing.T, s driver.Mutex) {
	key := Key(t)
	start := time.Now()
	mustAcquire(t, s, key, Token(), TTL)
	wantContended(t, s, key)
	tok := Token()
	if !eventually(TTL+Slack, func() bool {
		_, err := s.Acquire(ctx(t), key, tok, long)
		return err == nil
	}) {
		t.Fatalf("key still held %v after a %v lease", time.Since(start), TTL)
	}
	if el := time.Since(start); el < TTL-10*time.Millisecond {
		t.Fatalf("key freed after %v, before its %v lease ended", el, TTL)
	}
}

func testExpiredHolder(t *testing.T, s driver.Mutex) {
	key, old := Key(t), Token()
	mustAcquire(t, s, key, old, TTL)
	next := Token()
	if !eventually(TTL+Slack, func() bool {
		_, err := s.Acquire(ctx(t), key, next, long)
		return err == nil
	}) {
		t.Fatal("lease did not expire")
	}
	wantNotHeld(t, s.Release(ctx(t), key, old), driver.ErrTaken)
	_, err := s.Extend(ctx(t), key, old, long)
	wantNotHeld(t, err, driver.ErrTaken)
	wantContended(t, s, key) // the next holder still holds it
	mustRelease(t, s, key, next)
}

func testExtendNoRecreate(t *testing.T, s driver.Mutex) {
	key, tok := Key(t), Token()
	mustAcquire(t, s, key, tok, TTL)
	time.Sleep(TTL + 50*time.Millisecond) // letting the lease run out is the point
	_, err := s.Extend(ctx(t), key, tok, long)
	wantNotHeld(t, err, driver.ErrExpired)
	wantNotHeld(t, s.Release(ctx(t), key, tok), driver.ErrExpired)
	mustAcquire(t, s, key, Token(), long) // free, not re-created by Extend
}

func testHostile(t *testing.T, s driver.Mutex) {
	base := Key(t)
	keys := []string{
		base + `"'; DEL *`, base + "\n\r\t", base + `") redis.call("flushall") --`,
		base + " ünï ✓", base + "*", base + "a}b{c", base + ":fence",
	}
	tok := `") redis.call("flushall") --` + Token()
	for _, k := range keys {
		mustAcquire(t, s, k, tok, long)
	}
	for _, k := range keys {
		wantContended(t, s, k)
	}
	for _, k := range keys {
		mustRelease(t, s, k, tok)
	}
	mustAcquire(t, s, base, Token(), long) // untouched by its hostile cousins
}

func testCancelled(t *testing.T, s driver.Mutex) {
	key := Key(t)
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Acquire(c, key, Token(), long); err == nil {
		t.Fatal("Acquire with a cancelled context succeeded")
	}
	mustAcquire(t, s, key, Token(), long) // and changed nothing
}

func testNotify(t *testing.T, s driver.Mutex) {
	n, ok := s.(driver.Notifier)
	if !ok {
		t.Skip("store does not implement driver.Notifier")
	}
	key, tok := Key(t), Token()
	mustAcquire(t, s, key, tok, long)
	ch, cancel, err := n.Subscribe(ctx(t), key)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer cancel()
	start := time.Now()
	mustRelease(t, s, key, tok)
	select {
	case <-ch:
		t.Logf("woken %v after release", time.Since(start))
	case <-time.After(Slack):
		t.Fatalf("no notification within %v of release", Slack)
	}
}
