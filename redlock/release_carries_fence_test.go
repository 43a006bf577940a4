package redlock_test

import (
	"strconv"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/redlock"
)

// The release that ends a holding leaves the holding's fence (the largest
// of its nodes' grants) as the last fence of every node it frees, so that a
// later holding over another majority gets a greater one, without a raise
// round trip after the grant. Two nodes (both must grant: quorum 2), node 0
// seeded far ahead of node 1's clock, so only node 0's grant carries the
// holding's fence; the later holding is over node 1 alone, a majority that
// shares only node 1 with the first. Cases: released through the Store that
// granted it (its record has the fence), and through another Store (no
// record: it asks the nodes first). The control releases through the nodes
// themselves, a release that carries no fence: node 1 keeps its own, lower
// fence and the later holding's fence goes backwards.
func TestReleaseCarriesTheFence(t *testing.T) {
	c := startCluster(t, 2)
	ctx := testCtx(t)
	opts := &redlock.Options{NodeTimeout: 2 * time.Second}
	a, b := c.store(t, opts), c.independentStore(t, opts)
	var nodes []*redlock.RedisNode
	for _, cl := range c.clients {
		n, err := redlock.NewRedisNode(cl, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	later, err := redlock.New([]driver.Mutex{nodes[1]}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = later.Close() })

	for i, tc := range []struct {
		name    string
		release func(key, tok string) error
		carries bool
	}{
		{"same store", func(key, tok string) error { return a.Release(ctx, key, tok) }, true},
		{"another store", func(key, tok string) error { return b.Release(ctx, key, tok) }, true},
		{"control: the nodes' own release", func(key, tok string) error {
			for _, n := range nodes {
				if err := n.Release(ctx, key, tok); err != nil {
					return err
				}
			}
			return nil
		}, false},
	} {
		key := "carry-" + strconv.Itoa(i)
		seedFence(t, c.servers[0], key, seeded)
		tok := newToken()
		g, err := a.Acquire(ctx, key, tok, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if g.Fence != seeded+1 {
			t.Fatalf("%s: grant fence %d, want node 0's %d", tc.name, g.Fence, uint64(seeded+1))
		}
		if err := tc.release(key, tok); err != nil {
			t.Fatalf("%s: release: %v", tc.name, err)
		}
		f, held, err := nodeFence(c.servers[1], key)
		if err != nil || held {
			t.Fatalf("%s: node 1: fence %q, held %v, %v", tc.name, f, held, err)
		}
		next, err := later.Acquire(ctx, key, newToken(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: node 1 keeps fence %s; holding %d, next holding over node 1: %d", tc.name, f, g.Fence, next.Fence)
		if carried := f == strconv.FormatUint(g.Fence, 10); carried != tc.carries {
			t.Errorf("%s: node 1's last fence %s, holding's %d: carried %v, want %v", tc.name, f, g.Fence, carried, tc.carries)
		}
		if after := next.Fence > g.Fence; after != tc.carries {
			t.Errorf("%s: next holding's fence %d after %d: greater %v, want %v", tc.name, next.Fence, g.Fence, after, tc.carries)
		}
	}
}
