package redisstore_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/drivertest"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/redisstore"
)

// newFailoverClient returns a client of s's primary, closed when the test
// ends. After a failover its pool may still probe the dead primary in
// go-redis's redial loop, which sleeps a second between dials and ends at
// the next one once the pool is closed; the test waits for that (up to
// 3 s) so that TestMain's goleak check, which waits less, sees no leak.
func newFailoverClient(t *testing.T, s *redisserver.Sentinel) *redis.Client {
	t.Helper()
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: s.MasterName(), SentinelAddrs: s.SentinelAddrs(), MaxRetries: -1,
		DialTimeout: time.Second,
	})
	t.Cleanup(func() { testkit.Eventually(3*time.Second, func() bool { return !redialing() }) }) // runs after Close
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// redialing reports whether a go-redis pool's redial loop is running.
func redialing() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*ConnPool).tryDial")
}

// TestSentinelConformance runs the store, unchanged, on a FailoverClient.
func TestSentinelConformance(t *testing.T) {
	s := redisserver.StartSentinel(t)
	drivertest.Run(t, sentinelHarness(s))
}

// TestSentinelFailoverLosesLock shows what asynchronous replication does to
// a held lock: the primary acknowledges a lock, dies before replicating it,
// Sentinel promotes the replica, and a second client acquires the same lock
// while the first one's lease is still valid. It also records what the
// fencing token does: fences come from the server's clock (max(last + 1,
// TIME in µs)), so the second holder's fence, taken later on the promoted
// replica, is larger than the first's although the first holding never
// reached the replica, and a resource guarded by SetFenced rejects the
// stale holder's writes at once. (With the INCR counter of earlier
// versions the lost INCR handed out the same fence twice.) This rests on
// the two servers' clocks agreeing to within the time between the two
// acquisitions: here they share one machine.
func TestSentinelFailoverLosesLock(t *testing.T) {
	s := redisserver.StartSentinel(t)
	resource := redisserver.Start(t) // the protected resource, a separate server
	res := redis.NewClient(&redis.Options{Addr: resource.Addr()})
	t.Cleanup(func() { _ = res.Close() })
	ctx := testCtx(t)

	c1 := newClient(t, newFailoverClient(t, s), dlock.WithTTL(time.Minute))
	// A few holdings that do replicate: the tombstone is the same on both.
	for range 3 {
		l, err := c1.TryLock(ctx, "failover")
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
	}
	last, err := s.Primary().Do("GET", "dlock:{failover}")
	if err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, s.Replica(), "dlock:{failover}", last)

	// Cut replication deterministically: freeze the replica, drop its link
	// on the primary, take the lock, kill the primary, thaw the replica.
	s.Replica().Pause()
	if _, err := s.Primary().Do("CLIENT", "KILL", "TYPE", "replica"); err != nil {
		t.Fatal(err)
	}
	l1, err := c1.TryLock(ctx, "failover")
	if err != nil {
		t.Fatal(err)
	}
	s.Primary().Kill()
	s.Replica().Resume()
	t.Logf("client 1 holds fence %d; primary killed before replicating it", l1.Fence())

	waitMaster(t, s, s.Replica().Addr())
	c2 := newClient(t, newFailoverClient(t, s), dlock.WithTTL(time.Minute))
	l2, err := c2.Lock(ctx, "failover", dlock.WithWait(10*time.Second))
	if err != nil {
		t.Fatalf("second client after failover: %v", err)
	}
	if l1.Err() != nil || l1.Remaining() <= 0 {
		t.Fatalf("client 1's lease ended (%v): no double holder to show", l1.Err())
	}
	t.Logf("DOUBLE HOLDER: client 1 (fence %d, %v left) and client 2 (fence %d)", l1.Fence(), l1.Remaining(), l2.Fence())
	if l2.Fence() <= l1.Fence() {
		t.Fatalf("fence after failover = %d, client 1's = %d: want larger (fences follow the clock)", l2.Fence(), l1.Fence())
	}

	// The resource admits client 2 and rejects the stale holder.
	if err := redisstore.SetFenced(ctx, res, "account", "written by client 2", l2.Fence()); err != nil {
		t.Fatal(err)
	}
	err = redisstore.SetFenced(ctx, res, "account", "stale write by client 1", l1.Fence())
	if !errors.Is(err, dlock.ErrStaleFence) {
		t.Fatalf("stale write after the failover = %v, want ErrStaleFence", err)
	}
	// A later holding is admitted: the guard does not reject everything.
	_ = l2.Release(ctx)
	l3, err := c2.TryLock(ctx, "failover")
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Release(ctx)
	if err := redisstore.SetFenced(ctx, res, "account", "written by client 3", l3.Fence()); err != nil {
		t.Fatal(err)
	}
	t.Logf("client 3 fence %d, client 2 fence %d, client 1's write with fence %d rejected", l3.Fence(), l2.Fence(), l1.Fence())
}

func waitReplicated(t *testing.T, replica *redisserver.Server, key, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if v, err := replica.Do("GET", key); err == nil && v == want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s did not reach %q on the replica", key, want)
}

func waitMaster(t *testing.T, s *redisserver.Sentinel, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		got, err := s.MasterAddr(ctx)
		cancel()
		if err == nil && got == addr {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("sentinels did not promote %s within 30s", addr)
}
