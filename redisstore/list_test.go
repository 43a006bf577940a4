package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// listAll returns what List reports under prefix, failing on a key reported
// twice.
func listAll(t *testing.T, s *redisstore.Store, prefix string) map[string]driver.Info {
	t.Helper()
	got := map[string]driver.Info{}
	err := s.List(testCtx(t), prefix, func(k string, in driver.Info) bool {
		if _, dup := got[k]; dup {
			t.Errorf("key %q reported twice", k)
		}
		got[k] = in
		return true
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return got
}

// TestListReportsLocksAndSkipsTheRest: held locks as Inspect reports them,
// a released lock (tombstone) as not held with its fence, and keys under
// the prefix that are not locks skipped (the old `dlock list` stopped at the
// first one with exit 77).
func TestListReportsLocksAndSkipsTheRest(t *testing.T) {
	ctx := testCtx(t)
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	c := newClient(t, rdb)
	held := map[string]*dlock.Lease{}
	for _, k := range []string{"orders:1", "orders:2", "users:1", "a*b"} {
		l, err := c.TryLock(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		held[k] = l
	}
	gone, err := c.TryLock(ctx, "orders:gone")
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Release(ctx); err != nil { // leaves a tombstone and a release record
		t.Fatal(err)
	}
	// Not locks, but under the prefix and of type string: the scan sees them.
	junk := redisstore.DefaultPrefix + "{orders:junk}"
	for k, v := range map[string]string{junk: "hello", redisstore.DefaultPrefix + "{orders:3}:x": "1:2:3:4", "other:{orders:4}": "1:2:3:4"} {
		if err := rdb.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Inspect(ctx, "orders:junk"); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("control: the junk key must be refused by Inspect, got %v", err)
	}

	got := listAll(t, s, "")
	want := []string{"a*b", "orders:1", "orders:2", "orders:gone", "users:1"}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) {
		t.Fatalf("List: %v, want %v", keys, want)
	}
	for k, l := range held {
		in := got[k]
		if !in.Held || in.Token == "" || in.Holds != 1 || in.Fence != l.Fence() || in.Remaining <= 0 {
			t.Errorf("%s: %+v (fence %d)", k, in, l.Fence())
		}
	}
	if in := got["orders:gone"]; in.Held || in.Fence != gone.Fence() || in.Token != "" {
		t.Errorf("tombstone: %+v, want not held with fence %d", in, gone.Fence())
	}

	// The caller's prefix is literal: glob characters in it match only themselves.
	for prefix, want := range map[string][]string{"orders:": {"orders:1", "orders:2", "orders:gone"}, "a*": {"a*b"}, "zzz": nil} {
		if keys := slices.Sorted(maps.Keys(listAll(t, s, prefix))); !slices.Equal(keys, want) {
			t.Errorf("List(%q): %v, want %v", prefix, keys, want)
		}
	}

	// fn returning false stops the listing.
	n := 0
	if err := s.List(ctx, "", func(string, driver.Info) bool { n++; return false }); err != nil || n != 1 {
		t.Errorf("stop: %d calls, %v", n, err)
	}
}

// TestListAfterScriptFlush: a server that lost its scripts (restart, SCRIPT
// FLUSH) is listed all the same.
func TestListAfterScriptFlush(t *testing.T) {
	ctx := testCtx(t)
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	if _, err := newClient(t, rdb).TryLock(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, s, ""); !got["f"].Held {
		t.Fatalf("after SCRIPT FLUSH: %+v", got)
	}
}

// TestListScansEveryClusterPrimary: locks spread over three primaries are
// all listed, with the store's own prefix.
func TestListScansEveryClusterPrimary(t *testing.T) {
	ctx := testCtx(t)
	_, rdb := newCluster(t)
	s, err := redisstore.New(rdb, &redisstore.Options{Prefix: "app:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := mustClient(t, s)
	var want []string
	for i := range 30 {
		k := fmt.Sprintf("k%02d", i)
		if _, err := c.TryLock(ctx, k); err != nil {
			t.Fatal(err)
		}
		want = append(want, k)
	}
	perNode := map[string]int{}
	var mu sync.Mutex
	_ = rdb.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		keys, _ := n.Keys(ctx, "app:*").Result()
		mu.Lock()
		perNode[n.Options().Addr] = len(keys)
		mu.Unlock()
		return nil
	})
	if len(perNode) != 3 || slices.Contains(slices.Collect(maps.Values(perNode)), 0) {
		t.Fatalf("control: the locks must land on every primary: %v", perNode)
	}
	if keys := slices.Sorted(maps.Keys(listAll(t, s, "k"))); !slices.Equal(keys, want) {
		t.Fatalf("List: %v, want %v", keys, want)
	}
}
