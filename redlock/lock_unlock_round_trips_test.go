package redlock_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/redlock"
)

// tripCounter counts the EVALSHA commands a go-redis client sends: every
// lock operation of a RedisNode starts with one (followed by an EVAL only
// when the server does not have the script yet), and connection set-up
// commands, which depend on how the pool grows, are left out.
type tripCounter struct{ n atomic.Int64 }

func (h *tripCounter) add(cmd redis.Cmder) {
	if cmd.Name() == "evalsha" {
		h.n.Add(1)
	}
}

func (h *tripCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.add(cmd); return next(ctx, cmd) }
}

func (h *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.add(c)
		}
		return next(ctx, cmds)
	}
}

// raiseOnlyNode hides a RedisNode's FencedReleaser (and CallUndoer): a
// Store over such nodes raises each new holding's fence in a round trip of
// its own, as before the release carried it.
type raiseOnlyNode struct {
	driver.Mutex
	redlock.FenceRaiser
}

// countLockUnlock runs cycles uncontended Acquire+Release pairs on s, one at
// a time, after a warm-up that loads the scripts, and returns the script
// calls each node's client sent per pair. A fan-out returns once a quorum
// answered, so the last calls of a pair may still be on their way: it
// waits (up to 5 s) until every node counts at least least per pair, and
// all of them together leastTotal.
func countLockUnlock(t *testing.T, s *redlock.Store, hooks []*tripCounter, cycles int, least, leastTotal float64) []float64 {
	t.Helper()
	ctx := testCtx(t)
	pair := func() {
		tok := newToken()
		if _, err := s.Acquire(ctx, "rt", tok, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, "rt", tok); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() []int64 {
		out := make([]int64, len(hooks))
		for i, h := range hooks {
			out[i] = h.n.Load()
		}
		return out
	}
	settled := func(from []int64, n int, leastTotal float64) []int64 {
		waitFor(t, 5*time.Second, "the pairs' node calls", func() bool {
			total := 0.0
			for i, c := range counts() {
				if float64(c-from[i]) < least*float64(n) {
					return false
				}
				total += float64(c - from[i])
			}
			return total >= leastTotal*float64(n)
		})
		return counts()
	}
	base := counts()
	pair() // loads the scripts
	start := settled(base, 1, least*float64(len(hooks)))
	for range cycles {
		pair()
	}
	end := settled(start, cycles, leastTotal)
	per := make([]float64, len(hooks))
	for i := range hooks {
		per[i] = float64(end[i]-start[i]) / float64(cycles)
	}
	return per
}

// A lock+unlock on 5 nodes with fencing costs 10 round trips, one grant
// and one release per node, as redsync's (which has no fencing): the fence
// raise rides on the release. The counts do not depend on load: every
// node is asked exactly once per call. The control
// is the same Store over nodes that cannot carry the fence in the release:
// its raise round trip shows in the count (at least 3 raises a pair, which
// the acquisition waits for: 13; the wait for the count fails the test if
// they never come).
func TestLockUnlockRoundTrips(t *testing.T) {
	c := startCluster(t, 5)
	hooks := make([]*tripCounter, 5)
	for i, cl := range c.clients {
		hooks[i] = &tripCounter{}
		cl.(*redis.Client).AddHook(hooks[i])
	}
	const cycles = 20
	s := c.store(t, &redlock.Options{NodeTimeout: 2 * time.Second})
	if !s.Fencing() {
		t.Fatal("fencing is off: the count would test nothing")
	}
	total := 0.0
	for i, per := range countLockUnlock(t, s, hooks, cycles, 2, 10) {
		total += per
		if per != 2 {
			t.Errorf("node %d: %.2f round trips per lock+unlock, want 2 (grant, release)", i, per)
		}
	}
	t.Logf("fenced Redlock, 5 nodes: %.2f round trips per lock+unlock", total)

	var nodes []driver.Mutex
	for _, cl := range c.clients {
		n, err := redlock.NewRedisNode(cl, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, raiseOnlyNode{n, n})
	}
	old, err := redlock.New(nodes, &redlock.Options{NodeTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Close() })
	total = 0
	for _, per := range countLockUnlock(t, old, hooks, cycles, 2, 13) {
		total += per
	}
	t.Logf("control, fence raised in its own round trip: %.2f round trips per lock+unlock", total)
	if !old.Fencing() || total < 13 {
		t.Errorf("control: fencing %v, %.2f round trips per lock+unlock; want fencing and at least 13 (the raise counted)", old.Fencing(), total)
	}
}
