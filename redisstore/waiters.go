package redisstore

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

var _ driver.WaiterCounter = (*Store)(nil)

// Waiters implements driver.WaiterCounter: it returns how many connections are subscribed to the release channel
// of key (PUBSUB NUMSUB), that is how many Stores are waiting for it: a Store
// subscribes once however many of its callers wait, so this counts waiting
// processes (clients), not goroutines. On a Cluster the counts of all nodes
// are summed, since a subscriber may be connected to any of them. It returns
// an error matching driver.ErrInvalid for a bad key, or the server's error.
func (s *Store) Waiters(ctx context.Context, key string) (int, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	ch := s.channel(key)
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		n, err := numsub(ctx, s.client, ch)
		return int(n), err
	}
	var (
		mu    sync.Mutex
		total int64
	)
	err := cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
		n, err := numsub(ctx, c, ch)
		mu.Lock()
		total += n
		mu.Unlock()
		return err
	})
	return int(total), err
}

func numsub(ctx context.Context, c redis.Cmdable, channel string) (int64, error) {
	m, err := c.PubSubNumSub(ctx, channel).Result()
	return m[channel], err
}
