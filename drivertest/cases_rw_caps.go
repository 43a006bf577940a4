package drivertest

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases of the read-write lock suite for its optional capabilities
// (RWNotifier, RWInspector, RWBatchExtender) and its namespace.

// testRWNotify: a subscriber on another client is woken by a release and
// by a downgrade within Slack, and by nothing else: acquisitions,
// re-entries, extensions, refused calls, a mark and another key's release.
func (s *suite) testRWNotify(t *testing.T, m driver.RWMutex) {
	n, ok := driver.As[driver.RWNotifier](s.rwClient(t))
	if !ok {
		t.Skip("store does not implement driver.RWNotifier")
	}
	key, other, a, w := Key(t), Key(t), Token(), Token()
	ch, cancel, err := n.SubscribeRW(ctx(t), key)
	if err != nil {
		t.Fatalf("SubscribeRW(%q): %v", key, err)
	}
	t.Cleanup(cancel)
	quiet := func(what string) {
		t.Helper()
		select {
		case <-ch:
			t.Fatalf("a notification arrived although %s", what)
		case <-time.After(s.quiet()):
		}
	}
	woken := func(what string) {
		t.Helper()
		start := time.Now()
		select {
		case <-ch:
			t.Logf("%s woke the subscriber after %v", what, time.Since(start))
		case <-time.After(s.slack):
			t.Fatalf("no notification within %v of %s", s.slack, what)
		}
	}
	s.mustRW(t, m, key, a, driver.RWRead)
	s.mustRW(t, m, key, a, driver.RWRead)
	mustExtendRW(t, m, key, a, s.long)
	if _, err := m.AcquireWrite(ctx(t), key, w, s.long); !errors.Is(err, driver.ErrNotAcquired) { // a mark
		t.Fatalf("AcquireWrite with a reader: %v", err)
	}
	s.wantRWTaken(t, m, key, driver.RWRead, driver.RWRead)
	wantNotHeld(t, m.ReleaseRW(ctx(t), key, Token()), driver.ErrExpired)
	mustReleaseRW(t, m, other, s.tookRW(t, m, other, driver.RWWrite))
	quiet("nothing of the key was released or downgraded")
	mustReleaseRW(t, m, key, a)
	woken("a release")
	s.mustRW(t, m, key, w, driver.RWWrite)
	quiet("a writer only acquired")
	s.mustRW(t, m, key, w, driver.RWRead)
	woken("a downgrade")
}

// testRWInspect: InspectRW reports the mode, each live holding as the
// grants said (by token, or by fence where the store reports no token) and
// the writer-waiting mark; a free key reports zero.
func (s *suite) testRWInspect(t *testing.T, m driver.RWMutex) {
	in, ok := driver.As[driver.RWInspector](s.rwClient(t))
	if !ok {
		t.Skip("store does not implement driver.RWInspector")
	}
	key, a, b, w := Key(t), Token(), Token(), Token()
	zero := func(when string) {
		t.Helper()
		if info, err := in.InspectRW(ctx(t), key); err != nil || info.Mode != 0 || len(info.Holders) != 0 || info.WriterWaiting != 0 {
			t.Fatalf("InspectRW %s = %+v, %v; want zero", when, info, err)
		}
	}
	zero("of a fresh key")
	grants := map[string]driver.RWGrant{a: s.mustRW(t, m, key, a, driver.RWRead), b: s.mustRW(t, m, key, b, driver.RWRead)}
	if _, err := m.AcquireWrite(ctx(t), key, w, s.long); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("AcquireWrite with readers: %v", err)
	}
	info, err := in.InspectRW(ctx(t), key)
	if err != nil || info.Mode != driver.RWRead || len(info.Holders) != 2 || info.WriterWaiting <= 0 || info.WriterWaiting > driver.WriterWaitTTL {
		t.Fatalf("InspectRW = mode %v, %d holders, mark %v, %v; want read, 2 holders, a mark in (0, %v]", info.Mode, len(info.Holders), info.WriterWaiting, err, driver.WriterWaitTTL)
	}
	for _, h := range info.Holders {
		g, ok := grantFor(grants, h.Token, h.Fence, func(g driver.RWGrant) uint64 { return g.Fence })
		if !ok || h.Mode != driver.RWRead || h.Fence != g.Fence || h.Remaining <= 0 || h.Remaining > s.long {
			t.Fatalf("holder %v with fence %d, remaining %v: no such holding granted (or remaining not in (0, %v])", h.Mode, h.Fence, h.Remaining, s.long)
		}
	}
	mustReleaseRW(t, m, key, a)
	mustReleaseRW(t, m, key, b)
	g := s.mustRW(t, m, key, w, driver.RWWrite)
	info, err = in.InspectRW(ctx(t), key)
	if err != nil || info.Mode != driver.RWWrite || len(info.Holders) != 1 || info.Holders[0].Fence != g.Fence || info.WriterWaiting != 0 {
		t.Fatalf("InspectRW of the writer = %+v, %v; want its write holding alone, its mark gone", info, err)
	}
	mustReleaseRW(t, m, key, w)
	zero("after the last release")
}

// testRWNamespace: on a store that is also a Mutex or a Semaphore, those
// primitives' key "k" and the read-write lock's key "k" are unrelated.
func (s *suite) testRWNamespace(t *testing.T, m driver.RWMutex) {
	mu, isMutex := m.(driver.Mutex)
	sem, isSem := m.(driver.Semaphore)
	if !isMutex && !isSem {
		t.Skip("the store offers no other primitive")
	}
	key, w := Key(t), Token()
	if isMutex {
		mustAcquire(t, mu, key, Token(), s.long)
	}
	if isSem {
		mustPermits(t, sem, key, Token(), 1, 1, s)
	}
	s.mustRW(t, m, key, w, driver.RWWrite)
	if isMutex {
		s.wantContended(t, mu, key) // the mutex is still held, by its own holder
	}
	mustReleaseRW(t, m, key, w)
	if isMutex {
		s.wantContended(t, mu, key)
	}
}

// testRWBatch: ExtendRWBatch answers each request as ExtendRW would, in
// order: a reader's and a writer's fences (Holds 1), NotHeld (ErrExpired)
// for a token holding nothing, ErrInvalid for a bad TTL; the renewed
// holdings still hold afterwards and nothing was created.
func (s *suite) testRWBatch(t *testing.T, m driver.RWMutex) {
	b, ok := driver.As[driver.RWBatchExtender](s.rwClient(t))
	if !ok {
		t.Skip("store does not implement driver.RWBatchExtender")
	}
	kr, kw, r1, r2, w, c := Key(t), Key(t), Token(), Token(), Token(), Token()
	g1, g2, gw := s.mustRW(t, m, kr, r1, driver.RWRead), s.mustRW(t, m, kr, r2, driver.RWRead), s.mustRW(t, m, kw, w, driver.RWWrite)
	res := b.ExtendRWBatch(ctx(t), []driver.ExtendRequest{
		{Key: kr, Token: r1, TTL: s.long}, {Key: kr, Token: c, TTL: s.long}, {Key: kw, Token: w, TTL: s.long},
		{Key: kr, Token: r2, TTL: s.long}, {Key: kw, Token: w},
	})
	if len(res) != 5 {
		t.Fatalf("ExtendRWBatch of 5 requests: %d results", len(res))
	}
	for i, want := range []driver.RWGrant{g1, {}, gw, g2} {
		r := res[i]
		if i == 1 {
			wantNotHeld(t, r.Err, driver.ErrExpired)
			continue
		}
		if r.Err != nil || r.Grant.Fence != want.Fence || r.Grant.Holds != 1 || r.Grant.TTL <= 0 || r.Grant.TTL > s.long {
			t.Fatalf("result %d: %+v; want fence %d, Holds 1, TTL in (0, %v]", i, r, want.Fence, s.long)
		}
	}
	if !errors.Is(res[4].Err, driver.ErrInvalid) {
		t.Fatalf("result of a request without a TTL: %v; want ErrInvalid", res[4].Err)
	}
	s.wantRWTaken(t, m, kw, driver.RWRead, driver.RWWrite)
	mustReleaseRW(t, m, kw, w)
	wantNotHeld(t, m.ReleaseRW(ctx(t), kr, c), driver.ErrExpired)
	mustExtendRW(t, m, kr, r2, s.long)
	mustReleaseRW(t, m, kr, r1)
	mustReleaseRW(t, m, kr, r2)
}
