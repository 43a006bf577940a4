package chaos_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/chaos/check"
	"example.com/dlock/internal/chaos/history"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/redisstore"
)

// poll calls f every 5 ms until it reports true or d elapses.
func poll(d time.Duration, f func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if f() {
			return true
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
	return false
}

// lateGrant holds the reply to an acquisition in the proxy until the key
// has expired on the server and a contender holds it, then delivers it.
// acquire is the client under test (the library, or a naive client for the
// negative control); it returns the history.
func lateGrant(t *testing.T, key string, acquire func(ctx context.Context, rdb *redis.Client, rec *history.Recorder) error) ([]history.Op, error) {
	ttl := 300 * time.Millisecond
	srv, direct := newRedis(t)
	proxy, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	opts := clientOptions(proxy.Addr())
	opts.ReadTimeout = 10 * time.Second // wait for the late reply rather than time out
	slow := redis.NewClient(opts)
	defer slow.Close()
	ctx := testCtx(t, time.Minute)
	inspect, err := redisstore.New(direct, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Warm up: load the scripts and open the connection before the fault.
	if _, err := inspect.Acquire(ctx, "warmup", "w", ttl); err != nil {
		t.Fatal(err)
	}
	if err := slow.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var rec history.Recorder
	release := proxy.Hold(faultproxy.Downstream)
	defer release()
	done := make(chan error, 1)
	go func() { done <- acquire(ctx, slow, &rec) }()
	if !poll(5*time.Second, func() bool { i, err := inspect.Inspect(ctx, key); return err == nil && i.Held }) {
		t.Fatal("acquisition never reached the server")
	}
	b := newApp(t, &rec, 2, direct, nil, nil)
	var lb *dlock.Lease
	if !poll(ttl+slack+time.Second, func() bool { lb, err = b.tryLock(ctx, key, 5*time.Second); return err == nil }) {
		t.Fatal("contender never got the lock after the held grant's TTL")
	}
	release()
	aerr := <-done
	i, err := inspect.Inspect(ctx, key)
	if err != nil || !i.Held || i.Token != lb.Token() {
		t.Errorf("after the late grant, the contender no longer holds the lock: %+v, %v", i.Held, err)
	}
	_ = b.release(ctx, lb)
	return rec.Ops(), aerr
}

// R6. Fault: the proxy holds the reply to a successful acquisition until
// after its TTL (Kleppmann's delayed packet / Redlock step 3). Invariant:
// the library never reports a grant with no validity left. Pass: TryLock
// returns ErrNotAcquired, the contender keeps its lock, zero overlapping
// windows, linearizable history.
func TestDelayedGrantReplyDiscarded(t *testing.T) {
	ops, err := lateGrant(t, lockKey, func(ctx context.Context, rdb *redis.Client, rec *history.Recorder) error {
		s, _ := redisstore.New(rdb, nil)
		defer s.Close()
		locks, _ := dlock.New(s)
		a := &app{rec: rec, locks: locks, client: 1}
		l, err := a.tryLock(ctx, lockKey, 300*time.Millisecond)
		if l != nil {
			_ = a.release(ctx, l)
		}
		return err
	})
	me := check.MutualExclusion(ops)
	lerr := check.Linearizable(ops, 5*time.Millisecond, 30*time.Second)
	t.Logf("RESULT late-grant err=%v overlaps=%d linearizable=%v", err, len(me), lerr)
	if !errors.Is(err, dlock.ErrNotAcquired) || !strings.Contains(err.Error(), "after its validity") || len(me) != 0 || lerr != nil {
		t.Fatalf("late grant: err %v, overlaps %v, linearizability %v", err, me, lerr)
	}
}

// Negative control for R6: a naive client that counts its validity from the
// reply (as libraries without a validity check do) must overlap.
func TestDelayedGrantNegativeControlNaiveClient(t *testing.T) {
	ttl := 300 * time.Millisecond
	ops, _ := lateGrant(t, lockKey, func(ctx context.Context, rdb *redis.Client, rec *history.Recorder) error {
		s, _ := redisstore.New(rdb, nil)
		defer s.Close()
		op := rec.Invoke(1, history.Acquire, lockKey)
		g, err := s.Acquire(ctx, lockKey, "naive-token", ttl)
		op.Token, op.Fence, op.TTL = history.TokenID("naive-token"), g.Fence, ttl
		op.ValidUntil = history.Now() + int64(ttl-drift(ttl))
		rec.Finish(op, history.Ok)
		return err
	})
	me := check.MutualExclusion(ops)
	t.Logf("RESULT late-grant-control overlaps=%d", len(me))
	if len(me) == 0 {
		t.Fatal("a naive late grant is not detected as an overlap")
	}
}
