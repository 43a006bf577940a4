package redlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redlock"
)

// recordingNode hides the node's FenceRaiser (so the store cannot raise
// fences) and records each node-level grant's fence by token: the naive
// "maximum of the majority's counters" without the raise.
type recordingNode struct {
	inner driver.Mutex
	mu    *sync.Mutex
	seen  map[string]uint64 // token -> max fence over nodes that granted
}

func (r recordingNode) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := r.inner.Acquire(ctx, key, token, ttl)
	if err == nil {
		r.mu.Lock()
		r.seen[token] = max(r.seen[token], g.Fence)
		r.mu.Unlock()
	}
	return g, err
}

func (r recordingNode) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	return r.inner.Extend(ctx, key, token, ttl)
}

func (r recordingNode) Release(ctx context.Context, key, token string) error {
	return r.inner.Release(ctx, key, token)
}

// seeded is a fence far above the clock in µs (about 1.8e15 in 2026) and
// below 2^53. A node's next fence is max(last + 1, its clock in µs) while
// the key's tombstone lasts (redisstore's layout): seeding tombstones with
// it makes the "last + 1" rule decide, so that the per-node fences behave
// as the counters they stand for when nodes' fences run ahead of a clock.
const seeded = 4_000_000_000_000_000

// seedFence leaves key released on srv with last fence f for a minute.
func seedFence(t *testing.T, srv *redisserver.Server, key string, f uint64) {
	t.Helper()
	if _, err := srv.Do("SET", "dlock:{"+key+"}", "0:"+strconv.FormatUint(f, 10)+"::", "PX", "60000"); err != nil {
		t.Fatal(err)
	}
}

// nodeFence returns the fence in key's lock value on srv ("<holds>:<fence>:
// <call id>:<owner>") and whether the key is held there.
func nodeFence(srv *redisserver.Server, key string) (fence string, held bool, err error) {
	v, err := srv.Do("GET", "dlock:{"+key+"}")
	parts := strings.SplitN(v, ":", 4)
	if err != nil || len(parts) != 4 {
		return "", false, err
	}
	return parts[1], parts[0] != "0", nil
}

// divergeAndSwitchMajorities runs a schedule on 3 nodes (all with
// appendfsync always, so every node keeps its counter across a crash; the
// counters seeded far ahead of the clock, see seeded) in
// which the per-node fence counters diverge and two holdings use different
// majorities, and returns the fences the store reported for the holdings Z
// (on nodes 0,1) and W (on nodes 1,2), plus the naive maxima seen by the
// recorder:
//
//  1. a foreign owner holds the key on nodes 1 and 2 only;
//  2. five Redlock attempts fail on contention; each bumps node 0's counter
//     (granted there, then released by the cleanup);
//  3. the foreign owner releases; node 2 crashes; Z acquires on 0 and 1 and
//     releases; node 2 comes back (with its counter);
//  4. node 0 crashes; W acquires on 1 and 2.
func divergeAndSwitchMajorities(t *testing.T, raise bool) (z, w uint64, naive map[string]uint64) {
	c := startCluster(t, 3, redisserver.WithAOF(true))
	nodes := make([]*redlock.RedisNode, 3)
	stores := make([]driver.Mutex, 3)
	var mu sync.Mutex
	naive = map[string]uint64{}
	for i, cl := range c.clients {
		n, err := redlock.NewRedisNode(cl, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes[i] = n
		stores[i] = n
		if !raise {
			stores[i] = recordingNode{inner: n, mu: &mu, seen: naive}
		}
	}
	s, err := redlock.New(stores, &redlock.Options{NodeTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, key, ttl := testCtx(t), "fenced", 10*time.Second
	for _, srv := range c.servers {
		seedFence(t, srv, key, seeded)
	}
	for _, i := range []int{1, 2} {
		if _, err := nodes[i].Acquire(ctx, key, "foreign", ttl); err != nil {
			t.Fatal(err)
		}
	}
	for attempt := range 5 {
		if _, err := s.Acquire(ctx, key, newToken(), ttl); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("attempt against the foreign majority = %v, want ErrNotAcquired", err)
		}
		// Node 0 may answer after the attempt gave up and then release its
		// grant from the fan-out goroutine: wait for that grant (its counter
		// moved on) and its cleanup, or the next attempt's grant could meet
		// this one's on node 0 and be refused there.
		want := strconv.FormatUint(seeded+uint64(attempt)+1, 10)
		waitFor(t, 2*time.Second, "node 0 grant and cleanup", func() bool {
			f, held, err := nodeFence(c.servers[0], key)
			return err == nil && f == want && !held
		})
	}
	for _, i := range []int{1, 2} {
		if err := nodes[i].Release(ctx, key, "foreign"); err != nil {
			t.Fatal(err)
		}
	}
	holding := func(down int) uint64 {
		c.servers[down].Kill()
		defer c.servers[down].Restart(t)
		tok := newToken()
		g, err := s.Acquire(ctx, key, tok, ttl)
		if err != nil {
			t.Fatalf("acquire with node %d down: %v", down, err)
		}
		if err := s.Release(ctx, key, tok); err != nil {
			t.Fatalf("release with node %d down: %v", down, err)
		}
		if !raise {
			return naive[tok]
		}
		return g.Fence
	}
	z = holding(2)
	w = holding(0)
	return z, w, naive
}

// TestFenceRaiseKeepsFencesIncreasingAcrossMajorities checks the claim made
// for Redlock fences: while a majority of nodes keep their counters, every
// holding's fence exceeds every earlier holding's, even when counters
// diverge and holdings use different majorities.
func TestFenceRaiseKeepsFencesIncreasingAcrossMajorities(t *testing.T) {
	z, w, _ := divergeAndSwitchMajorities(t, true)
	t.Logf("fences: Z (nodes 0,1) = %d, then W (nodes 1,2) = %d", z, w)
	if w <= z {
		t.Fatalf("fence went backwards: Z = %d, later W = %d", z, w)
	}
}

// TestNaiveMaxFenceGoesBackwards is the negative control: the same schedule
// without the raise, taking the maximum of the granting nodes' counters,
// hands the later holding a smaller fence.
func TestNaiveMaxFenceGoesBackwards(t *testing.T) {
	z, w, _ := divergeAndSwitchMajorities(t, false)
	t.Logf("naive fences: Z = %d, then W = %d", z, w)
	if w >= z {
		t.Fatalf("naive max fences did not go backwards (Z = %d, W = %d): the schedule lost its teeth", z, w)
	}
}

// TestFenceRestartWithoutPersistence shows the limit of the claim: a node
// that loses its last fence (restarted without persistence) can make a later
// holding's fence smaller when it is the only node the two majorities share
// and the fences had run ahead of the nodes' clocks (seeded here). With
// appendfsync always the same schedule keeps fences increasing, and so does
// a restart without persistence when the fences follow the clocks (not
// seeded), as they do unless a node's clock ran ahead or stepped back.
func TestFenceRestartWithoutPersistence(t *testing.T) {
	for _, tc := range []struct{ persist, seed bool }{{false, true}, {true, true}, {false, false}} {
		persist := tc.persist
		var opts []redisserver.Option
		if persist {
			opts = append(opts, redisserver.WithAOF(true))
		}
		c := startCluster(t, 3, opts...)
		s := c.store(t, &redlock.Options{NodeTimeout: 200 * time.Millisecond})
		ctx, key, ttl := testCtx(t), "restart", 10*time.Second
		for _, srv := range c.servers {
			if tc.seed {
				seedFence(t, srv, key, seeded)
			}
		}
		// Z: the 5th holding, taken while node 2 is down, on nodes {0, 1}.
		c.servers[2].Kill()
		var z uint64
		for range 5 {
			tok := newToken()
			g, err := s.Acquire(ctx, key, tok, ttl)
			if err != nil {
				t.Fatal(err)
			}
			z = g.Fence
			if err := s.Release(ctx, key, tok); err != nil {
				t.Fatal(err)
			}
		}
		c.servers[2].Restart(t) // back, with its lagging counter
		c.servers[1].Kill()     // crash of the one node both majorities share
		c.servers[1].Restart(t) // immediate restart: empty unless persisted
		c.servers[0].Kill()
		tok := newToken()
		g, err := s.Acquire(ctx, key, tok, ttl) // W: majority {1, 2}
		if err != nil {
			for _, i := range []int{1, 2} {
				f, held, _ := nodeFence(c.servers[i], key)
				t.Logf("node %d: fence %q held %v", i, f, held)
			}
			t.Fatal(err)
		}
		_ = s.Release(ctx, key, tok)
		t.Logf("persist=%v seeded=%v: Z = %d, W = %d", persist, tc.seed, z, g.Fence)
		if (persist || !tc.seed) && g.Fence <= z {
			t.Errorf("persist=%v seeded=%v: fence went backwards (Z = %d, W = %d)", persist, tc.seed, z, g.Fence)
		}
		if !persist && tc.seed && g.Fence >= z {
			t.Errorf("without persistence, seeded: expected the fence to go backwards (Z = %d, W = %d)", z, g.Fence)
		}
	}
}

// A raise by a token that no longer holds the lock on a node must not touch
// the fence of the holding that took its place there: in redisstore's layout
// that holding's fence is the node's counter, and a stale raise above it
// could lift a holder above the holdings that come after it. On a free node
// the counter is raised; on the holder's own node the holding takes the
// raised fence.
func TestRaiseFenceLeavesAnotherHoldingAlone(t *testing.T) {
	c := startCluster(t, 1)
	node, err := redlock.NewRedisNode(c.clients[0], "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close() })
	ctx := t.Context()
	g, err := node.Acquire(ctx, "k", "u", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if held, err := node.RaiseFence(ctx, "k", "t", g.Fence+100); err != nil || held {
		t.Fatalf("raise by a non-holder = %v, %v; want false", held, err)
	}
	if e, err := node.Extend(ctx, "k", "u", time.Minute); err != nil || e.Fence != g.Fence {
		t.Fatalf("holder's fence after another token's raise = %d, %v; want %d unchanged", e.Fence, err, g.Fence)
	}
	if held, err := node.RaiseFence(ctx, "k", "u", g.Fence+10); err != nil || !held {
		t.Fatalf("raise by the holder = %v, %v; want true", held, err)
	}
	if e, err := node.Extend(ctx, "k", "u", time.Minute); err != nil || e.Fence != g.Fence+10 {
		t.Fatalf("holder's fence after its own raise = %d, %v; want %d", e.Fence, err, g.Fence+10)
	}
	if err := node.Release(ctx, "k", "u"); err != nil {
		t.Fatal(err)
	}
	// The raise on a free node goes far above the clock, so that the next
	// grant shows it (max(last + 1, clock)).
	if held, err := node.RaiseFence(ctx, "k", "t", seeded); err != nil || held {
		t.Fatalf("raise on a free node = %v, %v; want false", held, err)
	}
	if g2, err := node.Acquire(ctx, "k", "v", time.Minute); err != nil || g2.Fence != seeded+1 {
		t.Fatalf("next grant after a raise on the free node = %d, %v; want %d", g2.Fence, err, uint64(seeded+1))
	}
	if err := node.Release(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	// And on a node that never saw the key (no tombstone): the raise leaves
	// one, and it lasts no longer than the retention.
	if held, err := node.RaiseFence(ctx, "fresh", "t", seeded); err != nil || held {
		t.Fatalf("raise on a node without the key = %v, %v; want false", held, err)
	}
	if g3, err := node.Acquire(ctx, "fresh", "v", time.Minute); err != nil || g3.Fence != seeded+1 {
		t.Fatalf("next grant after a raise on a node without the key = %d, %v; want %d", g3.Fence, err, uint64(seeded+1))
	}
}

func (n recordingNode) Model() driver.Model { return n.inner.Model() }
