package redlock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redlock"
)

// splitTTL is the fixed lease of the split re-entry schedule: long enough
// that no lease of it nears its end while nodes are killed and restarted on
// a loaded machine, so every "still valid" below is far from its edge.
const splitTTL = 20 * time.Second

// splitReentry is the schedule of issue 13's S3 on 5 nodes that all
// run with appendfsync always (a killed node keeps every hold it granted):
//
//  1. nodes 3 and 4 are down;
//  2. the outer lease is taken by an explicit owner, on nodes 0, 1, 2;
//  3. nodes 3 and 4 come back; node 2 goes down;
//  4. the same owner re-enters: the inner lease lands on 0, 1, 3, 4, fresh
//     holds (with their own small counters) on 3 and 4;
//  5. node 2 comes back, still holding the outer hold.
//
// It returns the cluster and the outer and inner leases.
func splitReentry(t *testing.T, key string) (c *cluster, outer, inner *dlock.Lease) {
	t.Helper()
	c = startCluster(t, 5, redisserver.WithAOF(true))
	cl := newClient(t, c.store(t, &redlock.Options{NodeTimeout: 200 * time.Millisecond}), dlock.WithTTL(splitTTL))
	ctx := testCtx(t)
	c.servers[3].Kill()
	c.servers[4].Kill()
	octx := dlock.ContextWithOwner(ctx, dlock.NewOwner())
	outer, err := cl.Lock(octx, key)
	if err != nil {
		t.Fatalf("outer lock with nodes 3, 4 down: %v", err)
	}
	c.restart(t, 3, 4)
	c.servers[2].Kill()
	if inner, err = cl.Lock(octx, key); err != nil {
		t.Fatalf("re-entry with node 2 down: %v", err)
	}
	c.restart(t, 2)
	return c, outer, inner
}

// restart restarts the given (killed) nodes and waits until the cluster's
// clients reach each of them: a command on a pooled connection to the
// killed process fails once (the clients do not retry), which would make
// the node miss the schedule's next step.
func (c *cluster) restart(t *testing.T, nodes ...int) {
	t.Helper()
	for _, i := range nodes {
		c.servers[i].Restart(t)
		waitFor(t, 5*time.Second, fmt.Sprintf("node %d reachable", i), func() bool {
			return c.clients[i].Ping(t.Context()).Err() == nil
		})
	}
}

// nodeHolds reads the hold count of key's lock on every node ("" when the
// lock is absent there; "?" when the node does not answer). It reports
// counts only: tokens are secrets and stay out of test logs.
func nodeHolds(c *cluster, key string) []string {
	out := make([]string, len(c.servers))
	for i, s := range c.servers {
		v, err := s.Do("GET", "dlock:{"+key+"}")
		switch {
		case errors.Is(err, redisserver.ErrNil):
			out[i] = "0"
		case err != nil:
			out[i] = "?"
		default:
			out[i], _, _ = strings.Cut(v, ":")
		}
	}
	return out
}

// holdsSettle polls the node holds of key (as nodeHolds, joined by spaces)
// for up to 2 s until they read want, and returns the last reading: a late
// grant is released by the goroutine that ran it, a moment after the call
// that gave up on it returned.
func holdsSettle(c *cluster, key, want string) string {
	deadline := time.Now().Add(2 * time.Second)
	for {
		got := strings.Join(nodeHolds(c, key), " ")
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond) // polling the servers' state
	}
}

// TestS3ReleaseOfReentryKeepsOuterHolding: releasing a re-entrant lease
// removes holds only on the nodes its re-entry reached. The outer holding
// keeps all three of its nodes, so while the outer lease is valid an
// independent client (another store, other connections) cannot acquire;
// once the outer lease is released it can.
func TestS3ReleaseOfReentryKeepsOuterHolding(t *testing.T) {
	const key = "s3-reentry"
	c, outer, inner := splitReentry(t, key)
	ctx := testCtx(t)
	if inner.Holds() != 2 {
		t.Errorf("re-entry Holds = %d, want 2 (one outer hold, one inner)", inner.Holds())
	}
	if err := inner.Release(ctx); err != nil {
		t.Fatalf("inner release: %v", err)
	}
	// Nodes 3 and 4 had only the inner hold.
	if got := holdsSettle(c, key, "1 1 1 0 0"); got != "1 1 1 0 0" {
		t.Errorf("node holds after the inner release = %s, want 1 1 1 0 0", got)
	}
	if outer.Err() != nil || outer.Remaining() <= 0 {
		t.Fatalf("outer lease ended: err %v, remaining %v", outer.Err(), outer.Remaining())
	}
	other := newClient(t, c.independentStore(t, &redlock.Options{NodeTimeout: 200 * time.Millisecond}), dlock.WithTTL(splitTTL))
	if l, err := other.TryLock(ctx, key); err == nil {
		t.Errorf("independent client acquired (fence %d) while the outer lease is valid (remaining %v); node holds %v",
			l.Fence(), outer.Remaining(), nodeHolds(c, key))
	} else if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("independent TryLock = %v, want ErrNotAcquired", err)
	}
	// Positive control: the final release frees every node.
	if err := outer.Release(ctx); err != nil {
		t.Fatalf("outer release: %v", err)
	}
	if got := holdsSettle(c, key, "0 0 0 0 0"); got != "0 0 0 0 0" {
		t.Errorf("holds after the final release = %s, want 0 0 0 0 0", got)
	}
	l, err := other.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("independent client after the outer release: %v", err)
	}
	_ = l.Release(ctx)
}

// slowReentry is the schedule of issue 13's S4 on 5 nodes, each reached
// through a latency proxy (node timeout 1 s, a slow node answers in about
// 200 ms):
//
//  1. nodes 3 and 4 are down; 5 holdings are taken and released on nodes
//     0, 1, 2, whose fence counters reach 5 (3's and 4's stay at 0);
//  2. nodes 3 and 4 come back, slow: the outer lease (an explicit owner) is
//     granted in time by 0, 1, 2, which take the raised fence 6; 3 and 4
//     grant late, with their own counters (1);
//  3. nodes 1 and 2 turn slow, 3 and 4 fast: the same owner re-enters, and
//     the first majority to answer is 0, 3, 4.
//
// It returns the cluster, the outer and inner leases and the fence of the
// last holding before the outer one.
func slowReentry(t *testing.T, key string) (c *cluster, outer, inner *dlock.Lease, earlier uint64) {
	t.Helper()
	const slow = 100 * time.Millisecond // per direction
	c = startCluster(t, 5)
	var proxies []*latencyProxy
	c.clients, proxies = proxiedClients(t, c, 0)
	cl := newClient(t, c.store(t, &redlock.Options{NodeTimeout: time.Second}), dlock.WithTTL(splitTTL))
	ctx := testCtx(t)
	c.servers[3].Kill()
	c.servers[4].Kill()
	for range 5 {
		l, err := cl.Lock(ctx, key)
		if err != nil {
			t.Fatalf("holding before the outer one: %v", err)
		}
		earlier = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release before the outer holding: %v", err)
		}
	}
	c.restart(t, 3, 4)
	proxies[3].SetLatency(slow)
	proxies[4].SetLatency(slow)
	octx := dlock.ContextWithOwner(ctx, dlock.NewOwner())
	outer, err := cl.Lock(octx, key)
	if err != nil {
		t.Fatalf("outer lock: %v", err)
	}
	if got := holdsSettle(c, key, "1 1 1 1 1"); got != "1 1 1 1 1" {
		t.Fatalf("node holds after the outer lock = %s, want late grants on 3 and 4 too", got)
	}
	proxies[3].SetLatency(0)
	proxies[4].SetLatency(0)
	proxies[1].SetLatency(slow)
	proxies[2].SetLatency(slow)
	if inner, err = cl.Lock(octx, key); err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	proxies[1].SetLatency(0)
	proxies[2].SetLatency(0)
	return c, outer, inner, earlier
}

// TestS4ReentryFenceIsTheHoldingsFence: a re-entry whose first majority
// includes nodes that missed its holding's fence raise reports the holding's
// fence exactly, so a FenceGate admits the holder's write and refuses a late
// write of the earlier holding; and the next holding's fence is larger
// still.
func TestS4ReentryFenceIsTheHoldingsFence(t *testing.T) {
	const key = "s4-reentry"
	c, outer, inner, earlier := slowReentry(t, key)
	ctx := testCtx(t)
	t.Logf("fences: earlier holding %d, outer %d, re-entry %d", earlier, outer.Fence(), inner.Fence())
	if outer.Fence() <= earlier {
		t.Fatalf("outer fence %d not above the earlier holding's %d", outer.Fence(), earlier)
	}
	if inner.Fence() != outer.Fence() {
		t.Errorf("re-entry fence %d, want the holding's fence %d", inner.Fence(), outer.Fence())
	}
	var gate dlock.FenceGate
	if err := gate.Admit("stock", inner.Fence(), nil); err != nil {
		t.Fatalf("holder's write through the re-entry: %v", err)
	}
	if err := gate.Admit("stock", earlier, nil); !errors.Is(err, dlock.ErrStaleFence) {
		t.Errorf("earlier holding's late write at fence %d = %v, want ErrStaleFence", earlier, err)
	}
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := holdsSettle(c, key, "0 0 0 0 0"); got != "0 0 0 0 0" {
		t.Errorf("node holds after the final release = %s, want 0 0 0 0 0", got)
	}
	other := newClient(t, c.independentStore(t, &redlock.Options{NodeTimeout: time.Second}), dlock.WithTTL(splitTTL))
	next, err := other.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("next holding: %v", err)
	}
	defer func() { _ = next.Release(ctx) }()
	if next.Fence() <= outer.Fence() {
		t.Errorf("next holding's fence %d not above the outer holding's %d", next.Fence(), outer.Fence())
	}
}

// ghostOrForeign places holds of token on the given nodes directly (node
// stores, not the Redlock store), as an earlier attempt whose reply was lost
// or an acquisition through another Store would, and returns a Redlock store
// that has no record of them.
func ghostOrForeign(t *testing.T, c *cluster, key, token string, nodes ...int) *redlock.Store {
	t.Helper()
	for _, i := range nodes {
		n, err := redlock.NewRedisNode(c.clients[i], "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Acquire(testCtx(t), key, token, splitTTL); err != nil {
			t.Fatalf("hold on node %d: %v", i, err)
		}
		_ = n.Close()
	}
	return c.store(t, &redlock.Options{NodeTimeout: time.Second})
}

// TestGhostHoldsKeepTheGrantOnEveryNode: the Client's ghost-hold path. A
// fresh token's grant reports more than one hold when an earlier attempt
// was applied on a majority of nodes although its reply was lost; the
// Client then calls Release once per extra hold. Those Releases remove only the extra
// holds: the grant keeps its hold on every node, so no one else acquires,
// and one more Release frees every node.
func TestGhostHoldsKeepTheGrantOnEveryNode(t *testing.T) {
	const key = "ghost"
	c := startCluster(t, 5)
	tok := newToken()
	// The earlier attempt reached every node: however the grant's fan-out
	// is answered, a majority of its grants then show the extra hold.
	s := ghostOrForeign(t, c, key, tok, 0, 1, 2, 3, 4)
	ctx := testCtx(t)
	g, err := s.Acquire(ctx, key, tok, splitTTL)
	if err != nil {
		t.Fatal(err)
	}
	if g.Holds != 2 || g.Fence == 0 {
		t.Fatalf("grant = holds %d, fence %d; want 2 holds (one ghost) and a raised fence", g.Holds, g.Fence)
	}
	if err := s.Release(ctx, key, tok); err != nil { // the ghost
		t.Fatalf("ghost release: %v", err)
	}
	if got := holdsSettle(c, key, "1 1 1 1 1"); got != "1 1 1 1 1" {
		t.Errorf("node holds after the ghost release = %s, want 1 1 1 1 1", got)
	}
	other := newClient(t, c.independentStore(t, faultOpts), dlock.WithTTL(splitTTL))
	if l, err := other.TryLock(ctx, key); err == nil {
		_ = l.Release(ctx)
		t.Fatal("independent client acquired while the grant is held")
	}
	if err := s.Release(ctx, key, tok); err != nil {
		t.Fatalf("release: %v", err)
	}
	if got := holdsSettle(c, key, "0 0 0 0 0"); got != "0 0 0 0 0" {
		t.Errorf("node holds after the release = %s, want 0 0 0 0 0", got)
	}
}

// TestForeignReentryKeepsTheOuterHolding: a re-entry through a Store that
// did not grant the holding (another process using the same owner token)
// gets a fence no lower than the holding's, and its Release leaves the
// holding on every node.
func TestForeignReentryKeepsTheOuterHolding(t *testing.T) {
	const key = "foreign"
	c := startCluster(t, 5)
	ctx := testCtx(t)
	tok := newToken()
	a := c.store(t, &redlock.Options{NodeTimeout: time.Second})
	outer, err := a.Acquire(ctx, key, tok, splitTTL)
	if err != nil {
		t.Fatal(err)
	}
	holdsSettle(c, key, "1 1 1 1 1") // late grants, if any
	b := c.independentStore(t, &redlock.Options{NodeTimeout: time.Second})
	inner, err := b.Acquire(ctx, key, tok, splitTTL)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("outer fence %d, foreign re-entry fence %d, holds %d", outer.Fence, inner.Fence, inner.Holds)
	if inner.Fence < outer.Fence {
		t.Errorf("foreign re-entry fence %d below the holding's %d", inner.Fence, outer.Fence)
	}
	if err := b.Release(ctx, key, tok); err != nil {
		t.Fatalf("foreign release: %v", err)
	}
	if got := holdsSettle(c, key, "1 1 1 1 1"); got != "1 1 1 1 1" {
		t.Errorf("node holds after the foreign re-entry's release = %s, want 1 1 1 1 1", got)
	}
	if err := a.Release(ctx, key, tok); err != nil {
		t.Fatalf("release: %v", err)
	}
	if got := holdsSettle(c, key, "0 0 0 0 0"); got != "0 0 0 0 0" {
		t.Errorf("node holds after the release = %s, want 0 0 0 0 0", got)
	}
}

// TestOwnerCyclesLeaveNothingHeld: one owner token locking and releasing a
// key over and over (as a loop under dlock.ContextWithOwner does), with two
// slow nodes so that grants arrive late and releases are still in flight
// when the next acquisition starts, leaves no hold behind: every call of
// the token waits, per node, for the earlier ones, so an acquisition never
// counts a hold that a release in flight is about to remove.
func TestOwnerCyclesLeaveNothingHeld(t *testing.T) {
	const key, cycles = "owner-cycles", 200
	c := startCluster(t, 5)
	var proxies []*latencyProxy
	c.clients, proxies = proxiedClients(t, c, 3)
	for _, p := range proxies {
		p.SetLatency(time.Millisecond)
	}
	s := c.store(t, &redlock.Options{NodeTimeout: time.Second})
	ctx, tok := testCtx(t), newToken()
	for i := range cycles {
		g, err := s.Acquire(ctx, key, tok, splitTTL)
		if err != nil {
			t.Fatalf("cycle %d: acquire: %v", i, err)
		}
		if g.Holds != 1 {
			t.Fatalf("cycle %d: Holds = %d after releasing every earlier hold, want 1", i, g.Holds)
		}
		if err := s.Release(ctx, key, tok); err != nil {
			t.Fatalf("cycle %d: release: %v", i, err)
		}
	}
	if got := holdsSettle(c, key, "0 0 0 0 0"); got != "0 0 0 0 0" {
		t.Fatalf("node holds after %d cycles = %s, want 0 0 0 0 0", cycles, got)
	}
}
