package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"
)

// The Mutex conformance suite on the fair store, which is a driver.Queuer:
// it runs the queue cases too (QueuerServesInOrder among them).

func TestFairConformance(t *testing.T) {
	srv, _ := newRedis(t)
	h := singleHarness(srv)
	h.New = func(t *testing.T) driver.Store {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		return fairStateStore{newShortFairStore(t, rdb), rdb}
	}
	drivertest.Run(t, h)
}

func TestFairClusterConformance(t *testing.T) {
	c := redisserver.StartCluster(t, 3)
	drivertest.Run(t, drivertest.Harness{New: func(t *testing.T) driver.Store {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ReadTimeout: time.Second, WriteTimeout: time.Second})
		t.Cleanup(func() { _ = rdb.Close() })
		return fairStateStore{newShortFairStore(t, rdb), rdb}
	}})
}

func TestFairSentinelConformance(t *testing.T) {
	s := redisserver.StartSentinel(t)
	drivertest.Run(t, drivertest.Harness{New: func(t *testing.T) driver.Store {
		rdb := newFailoverClient(t, s)
		return fairStateStore{newShortFairStore(t, rdb), rdb}
	}})
}

// newShortFairStore is NewFair with a short retention (as newShortStore)
// and a waiter lease of a second.
func newShortFairStore(t *testing.T, rdb redis.UniversalClient) *redisstore.FairStore {
	t.Helper()
	return newFairStore(t, rdb, &redisstore.Options{Retention: 300 * time.Millisecond, WaiterLease: time.Second})
}

func newFairStore(t *testing.T, rdb redis.UniversalClient, opts *redisstore.Options) *redisstore.FairStore {
	t.Helper()
	s, err := redisstore.NewFair(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// fairStateStore is stateStore for a FairStore: the queue's keys share the
// lock's name as prefix, so they are counted too.
type fairStateStore struct {
	*redisstore.FairStore
	rdb redis.UniversalClient
}

func (s fairStateStore) KeyState(ctx context.Context, key string) (int, error) {
	lock, _ := s.Keys(key)
	return keyState(ctx, s.rdb, globEscaper.Replace(lock)+"*")
}
