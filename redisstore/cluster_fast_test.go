package redisstore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/internal/redisserver"
)

// The hot path sends EVALSHA through Do; a Cluster client must still route
// it by the lock's hash tag, and fall back to EVAL on each node.
func TestHotPathRoutesInCluster(t *testing.T) {
	cl := redisserver.StartCluster(t, 3)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	s := newStore(t, rdb)
	ctx := testCtx(t)
	for i := range 20 { // keys spread over every node
		key := "k" + strconv.Itoa(i)
		g, err := s.Acquire(ctx, key, "a", time.Minute)
		if err != nil {
			t.Fatalf("acquire %s: %v", key, err)
		}
		g2, err := s.Transfer(ctx, key, "a", "b", time.Minute)
		if err != nil || g2.Fence <= g.Fence {
			t.Fatalf("transfer %s: %+v %v", key, g2, err)
		}
		if err := s.Release(ctx, key, "b"); err != nil {
			t.Fatalf("release %s: %v", key, err)
		}
	}
}
