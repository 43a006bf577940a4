package redisstore_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/stepcall"
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
		// WithRead: a resource in the lock's slot (hash tag) is read with
		// the grant; one elsewhere is refused as invalid, changing nothing.
		res := "res:{" + key + "}"
		if err := rdb.Set(ctx, res, key, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, v, err := stepcall.AcquireRead(ctx, s, key, "c", time.Minute, res); err != nil || v.Data != key || !v.Found {
			t.Fatalf("AcquireRead %s of %s = %+v %v", key, res, v, err)
		}
		if _, v, err := stepcall.TransferRead(ctx, s, key, "c", "d", time.Minute, res); err != nil || v.Data != key || !v.Found {
			t.Fatalf("TransferRead %s of %s = %+v %v", key, res, v, err)
		}
		if err := s.Release(ctx, key, "d"); err != nil {
			t.Fatalf("release %s: %v", key, err)
		}
		other := "res:{" + key + "x}" // another slot for most keys
		if slot(t, rdb, other) == slot(t, rdb, "{"+key+"}") {
			continue
		}
		if _, _, err := stepcall.AcquireRead(ctx, s, key, "e", time.Minute, other); !errors.Is(err, dlock.ErrInvalid) {
			t.Fatalf("AcquireRead %s of %s in another slot = %v, want ErrInvalid", key, other, err)
		}
		if info, err := s.Inspect(ctx, key); err != nil || info.Held {
			t.Fatalf("after a refused cross-slot read: %+v %v", info, err)
		}
	}
}

func slot(t *testing.T, rdb *redis.ClusterClient, key string) int64 {
	n, err := rdb.ClusterKeySlot(testCtx(t), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
