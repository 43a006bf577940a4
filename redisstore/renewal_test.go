package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
)

// countingStore counts successful Extend calls that started after Release
// returned. (A renewal already under way when Release is called may still
// reach the store; it must find nothing to extend.)
type countingStore struct {
	driver.Mutex
	released      atomic.Bool
	lateExtends   atomic.Int64
	extendsBefore atomic.Int64
}

func (c *countingStore) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	late := c.released.Load()
	g, err := c.Mutex.Extend(ctx, key, token, ttl)
	switch {
	case late && err == nil:
		c.lateExtends.Add(1)
	case !late:
		c.extendsBefore.Add(1)
	}
	return g, err
}

func (c *countingStore) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	out := make([]driver.ExtendResult, len(reqs))
	for i, r := range reqs {
		out[i].Grant, out[i].Err = c.Extend(ctx, r.Key, r.Token, r.TTL)
	}
	return out
}

func TestRenewalKeepsLongJobsLockOnRedis(t *testing.T) {
	_, rdb := newRedis(t)
	c := newClient(t, rdb)
	// 600 ms: a renewal every 200 ms keeps 400 ms of slack for a loaded
	// machine (150 ms was lost once under CI load).
	const lease = 600 * time.Millisecond
	err := c.Do(testCtx(t), "long-job", func(ctx context.Context) error {
		time.Sleep(3 * lease) // the job outlives its lease several times over
		if ttl := rdb.PTTL(ctx, "dlock:{long-job}").Val(); ttl <= 0 {
			t.Errorf("PTTL %v during the job", ttl)
		}
		_, err := c.TryLock(context.Background(), "long-job")
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("another owner got the lock mid-job: %v", err)
		}
		return ctx.Err()
	}, dlock.WithAutoRenew(lease))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
}

func TestRenewalNeverOutlivesRelease(t *testing.T) {
	_, rdb := newRedis(t)
	cs := &countingStore{Mutex: newStore(t, rdb)}
	c, err := dlock.New(cs)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	const lease = 60 * time.Millisecond
	var leases []*dlock.Lease
	for _, k := range []string{"r1", "r2", "r3"} {
		l, err := c.Lock(testCtx(t), k, dlock.WithAutoRenew(lease))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	deadline := time.Now().Add(5 * time.Second)
	for cs.extendsBefore.Load() < 6 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for _, l := range leases {
		if err := l.Release(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	cs.released.Store(true)
	time.Sleep(4 * lease) // several renewal periods in which nothing may happen
	if n := cs.lateExtends.Load(); n != 0 {
		t.Fatalf("%d renewals succeeded after Release returned", n)
	}
	for _, k := range []string{"r1", "r2", "r3"} {
		if v := rdb.Get(testCtx(t), "dlock:{"+k+"}").Val(); !strings.HasPrefix(v, "0:") {
			t.Fatalf("lock key %q = %q after release, want a tombstone (holds 0)", k, v)
		}
	}
	if n := cs.extendsBefore.Load(); n < 6 {
		t.Fatalf("only %d renewals while held: the negative side of this test did not run", n)
	}
}
