package redisstore_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/drivertest"
	"example.com/dlock/internal/redisserver"
)

// newCluster starts a real 3-primary Redis Cluster and returns a
// ClusterClient for it.
func newCluster(t *testing.T) (*redisserver.Cluster, *redis.ClusterClient) {
	t.Helper()
	c := redisserver.StartCluster(t, 3)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	return c, rdb
}

// TestClusterConformance runs the store, unchanged, on a ClusterClient.
func TestClusterConformance(t *testing.T) {
	c := redisserver.StartCluster(t, 3)
	drivertest.Run(t, clusterHarness(c))
}

// TestClusterKeysSpreadOverAllSlots locks many keys at once: every lock's
// keys share a slot (a cross-slot script would fail), and the locks land on
// every primary.
func TestClusterKeysSpreadOverAllSlots(t *testing.T) {
	c, rdb := newCluster(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	const n = 300
	tok := "cluster-owner"
	for i := range n {
		if _, err := s.Acquire(ctx, "spread-"+strconv.Itoa(i), tok, time.Minute); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	for _, node := range c.Nodes() {
		size, err := node.Do("DBSIZE")
		if err != nil {
			t.Fatal(err)
		}
		// Each lock is one key (its fence is in its value).
		if k, _ := strconv.Atoi(size); k == 0 {
			t.Errorf("node %s holds %s keys, want some", node.Addr(), size)
		}
		t.Logf("node %s: %s keys", node.Addr(), size)
	}
	for i := range n {
		if err := s.Release(ctx, "spread-"+strconv.Itoa(i), tok); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
}

// TestClusterReleaseWakesWaiter: pub/sub wake-ups work across the cluster
// for keys on every primary: a waiter on a key held for a minute acquires
// within a second of the release.
func TestClusterReleaseWakesWaiter(t *testing.T) {
	c, rdb := newCluster(t)
	holder, waiter := newClient(t, rdb), newClient(t, rdb)
	ctx := testCtx(t)
	for i := range 6 { // keys hashing to different primaries
		key := fmt.Sprintf("wake-%d", i)
		l, err := holder.Lock(ctx, key, dlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l2, err := waiter.Lock(ctx, key, dlock.WithWait(10*time.Second))
			if err == nil {
				err = l2.Release(ctx)
			}
			got <- err
		}()
		waitSubscribed(t, c, "dlock:{"+key+"}:released")
		released := time.Now()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("%s: waiter: %v", key, err)
			}
			t.Logf("%s: waiter acquired %v after the release", key, time.Since(released))
		case <-time.After(time.Second):
			t.Fatalf("%s: waiter not woken within 1s of the release (the holder's TTL was a minute)", key)
		}
	}
}

// waitSubscribed polls the cluster's nodes until one reports a subscriber
// on channel.
func waitSubscribed(t *testing.T, c *redisserver.Cluster, channel string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range c.Nodes() {
			if r, err := n.Do("PUBSUB", "NUMSUB", channel); err == nil && strings.HasSuffix(r, "\n1") {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no subscriber on %s within 5s", channel)
}
