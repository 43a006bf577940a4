package drivertest

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases of the semaphore suite for its optional capabilities:
// PermitNotifier, PermitInspector and PermitBatchExtender.

// testSemNotify: a subscriber on another client is woken by a release of
// permits of its key within Slack, and by nothing else: acquisitions,
// re-acquisitions, extensions, refused calls and another key's release.
func (s *suite) testSemNotify(t *testing.T, m driver.Semaphore) {
	n, ok := driver.As[driver.PermitNotifier](s.semClient(t))
	if !ok {
		t.Skip("store does not implement driver.PermitNotifier")
	}
	key, other, a, b := Key(t), Key(t), Token(), Token()
	ch, cancel, err := n.SubscribePermits(ctx(t), key)
	if err != nil {
		t.Fatalf("SubscribePermits(%q): %v", key, err)
	}
	t.Cleanup(cancel)
	mustPermits(t, m, key, a, 2, 1, s)
	mustPermits(t, m, key, a, 2, 1, s)
	mustPermits(t, m, key, b, 2, 1, s)
	mustExtendPermits(t, m, key, a, s.long)
	s.wantTaken(t, m, key, 2, 1, 2)
	wantNotHeld(t, m.ReleasePermits(ctx(t), key, Token()), driver.ErrExpired)
	mustPermits(t, m, other, a, 1, 1, s)
	mustReleasePermits(t, m, other, a)
	select {
	case <-ch:
		t.Fatal("a notification arrived although no permit of the key was released")
	case <-time.After(s.quiet()):
	}
	start := time.Now()
	mustReleasePermits(t, m, key, b)
	select {
	case <-ch:
		t.Logf("the release woke the subscriber after %v", time.Since(start))
	case <-time.After(s.slack):
		t.Fatalf("no notification within %v of a release of permits", s.slack)
	}
}

// testSemInspect: InspectPermits reports the limit, the permits out and
// each live holding as the grants said (a holder's token, or an empty one
// where the store keeps only a digest of it); a key with none out reports
// zero.
func (s *suite) testSemInspect(t *testing.T, m driver.Semaphore) {
	in, ok := driver.As[driver.PermitInspector](s.semClient(t))
	if !ok {
		t.Skip("store does not implement driver.PermitInspector")
	}
	key, a, b := Key(t), Token(), Token()
	if info, err := in.InspectPermits(ctx(t), key); err != nil || info.Limit != 0 || info.Used != 0 || len(info.Holders) != 0 {
		t.Fatalf("InspectPermits of a fresh key = %+v, %v; want zero", info, err)
	}
	grants := map[string]driver.PermitGrant{a: mustPermits(t, m, key, a, 4, 1, s), b: mustPermits(t, m, key, b, 4, 2, s)}
	info, err := in.InspectPermits(ctx(t), key)
	if err != nil || info.Limit != 4 || info.Used != 3 || len(info.Holders) != 2 {
		t.Fatalf("InspectPermits = %+v, %v; want limit 4, 3 used by 2 holders", info, err)
	}
	for _, h := range info.Holders {
		g, ok := grantFor(grants, h.Token, h.Fence, func(g driver.PermitGrant) uint64 { return g.Fence })
		if !ok || h.Permits != g.Permits || h.Fence != g.Fence || h.Remaining <= 0 || h.Remaining > s.long {
			t.Fatalf("holder with %d permits, fence %d, remaining %v: no such holding granted (or remaining not in (0, %v])", h.Permits, h.Fence, h.Remaining, s.long)
		}
	}
	mustReleasePermits(t, m, key, b)
	if info, err := in.InspectPermits(ctx(t), key); err != nil || info.Used != 1 || len(info.Holders) != 1 || !isHolder(info.Holders[0].Token, info.Holders[0].Fence, a, grants[a].Fence) {
		t.Fatalf("InspectPermits after a release = %d used by %d holders, %v; want 1 by the remaining holder", info.Used, len(info.Holders), err)
	}
	mustReleasePermits(t, m, key, a)
	if info, err := in.InspectPermits(ctx(t), key); err != nil || info.Limit != 0 || info.Used != 0 || len(info.Holders) != 0 {
		t.Fatalf("InspectPermits after the last release = %d used of %d, %v; want zero", info.Used, info.Limit, err)
	}
}

// grantFor finds the grant an inspected holder stands for: by its token,
// or by its fence when the store cannot tell the token (Token "": it keeps
// a digest of it only, as etcdstore does).
func grantFor[G any](grants map[string]G, tok string, fence uint64, fenceOf func(G) uint64) (G, bool) {
	if tok != "" {
		g, ok := grants[tok]
		return g, ok
	}
	for _, g := range grants {
		if fenceOf(g) == fence {
			return g, true
		}
	}
	var zero G
	return zero, false
}

// isHolder reports whether an inspected holder (token, fence) is the
// holding of want with fence wantFence, as grantFor matches it.
func isHolder(tok string, fence uint64, want string, wantFence uint64) bool {
	return tok == want || (tok == "" && fence == wantFence)
}

// testSemBatch: ExtendPermitsBatch answers each request as ExtendPermits
// would, in order: the holdings' fences and permits (as Holds), NotHeld
// (ErrExpired) for a token holding nothing, ErrInvalid for a bad TTL; the
// renewed holdings still hold afterwards and the others are unchanged.
func (s *suite) testSemBatch(t *testing.T, m driver.Semaphore) {
	b, ok := driver.As[driver.PermitBatchExtender](s.semClient(t))
	if !ok {
		t.Skip("store does not implement driver.PermitBatchExtender")
	}
	k1, k2, a, c := Key(t), Key(t), Token(), Token()
	g1, g2 := mustPermits(t, m, k1, a, 3, 1, s), mustPermits(t, m, k2, a, 3, 2, s)
	res := b.ExtendPermitsBatch(ctx(t), []driver.ExtendRequest{
		{Key: k1, Token: a, TTL: s.long}, {Key: k1, Token: c, TTL: s.long}, {Key: k2, Token: a, TTL: s.long}, {Key: k2, Token: a},
	})
	if len(res) != 4 {
		t.Fatalf("ExtendPermitsBatch of 4 requests: %d results", len(res))
	}
	for i, want := range []driver.PermitGrant{g1, {}, g2} {
		r := res[i]
		if i == 1 {
			wantNotHeld(t, r.Err, driver.ErrExpired)
			continue
		}
		if r.Err != nil || r.Grant.Fence != want.Fence || r.Grant.Holds != want.Permits || r.Grant.TTL <= 0 || r.Grant.TTL > s.long {
			t.Fatalf("result %d: %+v; want fence %d, %d permits, TTL in (0, %v]", i, r, want.Fence, want.Permits, s.long)
		}
	}
	if !errors.Is(res[3].Err, driver.ErrInvalid) {
		t.Fatalf("result of a request without a TTL: %v; want ErrInvalid", res[3].Err)
	}
	s.wantTaken(t, m, k1, 3, 3, 1)
	mustExtendPermits(t, m, k2, a, s.long)
	mustReleasePermits(t, m, k1, a)
	mustReleasePermits(t, m, k2, a)
}
