package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/internal/redisserver"
)

// The drivertest harnesses for a single server, a Cluster and Sentinel.
// Every New is a new go-redis client (its own connections and pub/sub), as
// another process would have; stores keep a short retention (and report
// their keys, stateStore) so that the bounded-state case does not wait 30 s.

// singleHarness runs the suite on one real server, with Pause freezing it
// (SIGSTOP) and Foreign writing a plain string where a lock would be. The
// clients honour context deadlines on the wire (ContextTimeoutEnabled):
// without it go-redis waits its 3 s ReadTimeout on a frozen server whatever
// the context says.
func singleHarness(srv *redisserver.Server) drivertest.Harness {
	return drivertest.Harness{
		New: func(t *testing.T) driver.Store {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rdb.Close() })
			return stateStore{newShortStore(t, rdb), rdb}
		},
		Pause: func(*testing.T) func() { srv.Pause(); return srv.Resume },
		Foreign: func(t *testing.T, key string) {
			if _, err := srv.Do("SET", "dlock:{"+key+"}", "not a lock"); err != nil {
				t.Fatalf("SET a foreign value: %v", err)
			}
		},
	}
}

// clusterHarness runs the suite on a Cluster, one ClusterClient per New.
// Timeouts of a second (not 3 s) keep the store's retention, which covers
// go-redis's retry window, and so the bounded-state case, near 8 s.
func clusterHarness(c *redisserver.Cluster) drivertest.Harness {
	return drivertest.Harness{New: func(t *testing.T) driver.Store {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ReadTimeout: time.Second, WriteTimeout: time.Second})
		t.Cleanup(func() { _ = rdb.Close() })
		return stateStore{newShortStore(t, rdb), rdb}
	}}
}

// sentinelHarness runs the suite through Sentinel, one FailoverClient per
// New.
func sentinelHarness(s *redisserver.Sentinel) drivertest.Harness {
	return drivertest.Harness{New: func(t *testing.T) driver.Store {
		rdb := newFailoverClient(t, s)
		return stateStore{newShortStore(t, rdb), rdb}
	}}
}
