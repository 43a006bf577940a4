package drivertest

import (
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases for driver.Inspector, driver.Lister and driver.WaiterCounter.

// inspect calls Inspect, failing the test on an error.
func inspect(t *testing.T, in driver.Inspector, key string) driver.Info {
	t.Helper()
	info, err := in.Inspect(ctx(t), key)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", key, err)
	}
	return info
}

// checkHeld checks info against a holding of tok with fence and holds.
func (s *suite) checkHeld(t *testing.T, what string, info driver.Info, tok string, fence uint64, holds int) {
	t.Helper()
	okTok := info.Token == tok || info.Token == ""
	okRem := info.Remaining < 0 || (info.Remaining > 0 && info.Remaining <= s.grantBound())
	if !s.model.Session && info.Remaining >= 0 && info.Remaining < s.long-s.slack {
		okRem = false
	}
	okFence := info.Fence == fence || (s.h.InspectFenceMayBeLater && info.Fence > fence)
	if !info.Held || !okTok || info.Holds != holds || !okFence || !okRem {
		t.Fatalf("%s: Inspect = {Held %v, token matches %v, Holds %d, Fence %d, Remaining %v}; want held by the token, %d holds, fence %d, remaining about %v",
			what, info.Held, info.Token == tok, info.Holds, info.Fence, info.Remaining, holds, fence, s.long)
	}
}

// checkFree checks info of a free key whose last fence was last (0: never
// locked).
func (s *suite) checkFree(t *testing.T, what string, info driver.Info, last uint64) {
	t.Helper()
	okFence := info.Fence == 0 || info.Fence == last || (s.h.InspectFenceMayBeLater && last > 0 && info.Fence > last)
	if info.Held || info.Holds != 0 || info.Token != "" || !okFence {
		t.Fatalf("%s: Inspect = {Held %v, Holds %d, token set %v, Fence %d}; want free, fence 0 or %d", what, info.Held, info.Holds, info.Token != "", info.Fence, last)
	}
}

// testInspect: Inspect reports the real state (driver.Info) of a key never
// locked, held, re-entered, released and expired, and changes nothing.
func (s *suite) testInspect(t *testing.T, m driver.Mutex) {
	in, ok := driver.As[driver.Inspector](s.client(t))
	if !ok {
		t.Skip("store does not implement driver.Inspector")
	}
	key, tok := Key(t), Token()
	s.checkFree(t, "never locked", inspect(t, in, key), 0)
	g := mustAcquire(t, m, key, tok, s.long)
	s.checkHeld(t, "held", inspect(t, in, key), tok, g.Fence, 1)
	mustAcquire(t, m, key, tok, s.long)
	s.checkHeld(t, "re-entered", inspect(t, in, key), tok, g.Fence, 2)
	s.wantContended(t, m, key) // Inspect changed nothing
	mustRelease(t, m, key, tok)
	s.checkHeld(t, "one of two holds released", inspect(t, in, key), tok, g.Fence, 1)
	mustRelease(t, m, key, tok)
	s.checkFree(t, "released", inspect(t, in, key), g.Fence)
	if s.model.Session {
		return
	}
	key = Key(t)
	start := time.Now() // the lease counts from the call's start
	g = mustAcquire(t, m, key, Token(), s.ttl)
	if !eventually(s.ttl+s.slack, func() bool { return !inspect(t, in, key).Held }) {
		t.Fatalf("Inspect reports a key held %v after its %v lease", time.Since(start), s.ttl)
	}
	if el := time.Since(start); el < s.ttl-early {
		t.Fatalf("Inspect reports a key free after %v, before its %v lease ended", el, s.ttl)
	}
	s.checkFree(t, "expired", inspect(t, in, key), g.Fence)
}

// testLister: List under a prefix reports every held key under it with its
// state, nothing outside the prefix, no foreign value (Harness.Foreign), and
// stops when fn returns false.
func (s *suite) testLister(t *testing.T, m driver.Mutex) {
	l, ok := driver.As[driver.Lister](s.client(t))
	if !ok {
		t.Skip("store does not implement driver.Lister")
	}
	prefix := Key(t) + "/"
	held := map[string]int{prefix + "a": 1, prefix + "b": 2, prefix + "c ü*": 1}
	for k, n := range held {
		tok := Token()
		for range n {
			mustAcquire(t, m, k, tok, s.long)
		}
	}
	released, outside, foreign := prefix+"released", Key(t), prefix+"foreign"
	mustRelease(t, m, released, s.mustTok(t, m, released))
	s.mustTok(t, m, outside)
	if s.h.Foreign != nil {
		s.h.Foreign(t, foreign)
	}
	seen := map[string]driver.Info{}
	err := l.List(ctx(t), prefix, func(k string, info driver.Info) bool {
		if _, dup := seen[k]; dup {
			t.Errorf("List reported %q twice", k)
		}
		seen[k] = info
		return true
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	for k, info := range seen {
		switch {
		case !strings.HasPrefix(k, prefix):
			t.Errorf("List(%q) reported %q, outside the prefix", prefix, k)
		case k == foreign:
			t.Errorf("List reported the foreign value at %q as a lock: %+v", k, info)
		case k == released && info.Held:
			t.Errorf("List reports released key %q as held", k)
		}
	}
	for k, n := range held {
		if info, ok := seen[k]; !ok || !info.Held || info.Holds != n {
			t.Errorf("List: %q reported %v with %+v; want held with %d holds", k, ok, info, n)
		}
	}
	calls := 0
	if err := l.List(ctx(t), prefix, func(string, driver.Info) bool { calls++; return false }); err != nil || calls != 1 {
		t.Errorf("List whose fn returns false: %d calls, %v; want 1 call", calls, err)
	}
}

// waitWaiters polls until Waiters(key) reports want, or fails.
func (s *suite) waitWaiters(t *testing.T, wc driver.WaiterCounter, key string, want int) {
	t.Helper()
	var n int
	var err error
	if !eventually(s.slack+5*time.Second, func() bool { n, err = wc.Waiters(ctx(t), key); return err == nil && n == want }) {
		t.Fatalf("Waiters(%q) = %d, %v; want %d", key, n, err, want)
	}
}

// testWaiters: Waiters counts the clients waiting for a key (subscribed, or
// queued on a Queuer), and drops back to zero when they stop.
func (s *suite) testWaiters(t *testing.T, m driver.Mutex) {
	wc, ok := driver.As[driver.WaiterCounter](m)
	if !ok {
		t.Skip("store does not implement driver.WaiterCounter")
	}
	key := Key(t)
	s.mustTok(t, m, key)
	s.waitWaiters(t, wc, key, 0)
	var stops []func()
	for i := range 2 {
		stops = append(stops, s.startWaiter(t, s.client(t), key))
		s.waitWaiters(t, wc, key, i+1)
	}
	for i, stop := range stops {
		stop()
		s.waitWaiters(t, wc, key, len(stops)-i-1)
	}
}

// startWaiter makes client c wait for key (Subscribe, or AcquireQueued if
// the store has no Notifier) and returns the function that stops it.
func (s *suite) startWaiter(t *testing.T, c driver.Mutex, key string) (stop func()) {
	t.Helper()
	if n, ok := driver.As[driver.Notifier](c); ok {
		_, cancel, err := n.Subscribe(ctx(t), key)
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		return cancel
	}
	q, ok := driver.As[driver.Queuer](c)
	if !ok {
		t.Skip("a WaiterCounter with neither Notifier nor Queuer: no way to wait")
	}
	wctx, cancel := contextWithCancel(t)
	done := make(chan error, 1)
	go func() { _, err := q.AcquireQueued(wctx, key, Token(), s.long); done <- err }()
	return func() {
		cancel()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("a cancelled AcquireQueued acquired %q", key)
			}
		case <-time.After(s.slack + 5*time.Second):
			t.Errorf("AcquireQueued did not return within %v of its context's end", s.slack+5*time.Second)
		}
	}
}
