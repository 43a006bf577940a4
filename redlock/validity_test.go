package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
	"example.com/dlock/redlock"
)

// fakeClock is a dlock.Clock that only moves when told. Its timers never
// fire (the tests read validity, they do not wait for it).
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

type noTimer struct{}

func (noTimer) Stop() bool { return true }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) AfterFunc(time.Duration, func()) dlock.Timer { return noTimer{} }

// slowNode is a memstore node whose Acquire advances the fake clock by
// delay (the time the round trip "took") and whose outcome can be forced.
type slowNode struct {
	driver.Mutex
	clock     *fakeClock
	delay     time.Duration
	contended bool
	releases  atomic.Int64
}

func (n *slowNode) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	n.clock.Advance(n.delay)
	if n.contended {
		return driver.Grant{}, &driver.ContendedError{Remaining: time.Second}
	}
	return n.Mutex.Acquire(ctx, key, token, ttl)
}

func (n *slowNode) Release(ctx context.Context, key, token string) error {
	n.releases.Add(1)
	return n.Mutex.Release(ctx, key, token)
}

func fakeNodes(clk *fakeClock, delays []time.Duration, contended int) ([]driver.Mutex, []*slowNode) {
	var stores []driver.Mutex
	var nodes []*slowNode
	for i, d := range delays {
		n := &slowNode{Mutex: memstore.New(nil), clock: clk, delay: d, contended: i < contended}
		stores, nodes = append(stores, n), append(nodes, n)
	}
	return stores, nodes
}

// TestValidityArithmetic checks, on a fake clock, that the lease's remaining
// validity right after Lock is exactly Redlock's TTL − elapsed − drift, with
// the drift (TTL × factor + 2 ms) counted once between store and Client.
func TestValidityArithmetic(t *testing.T) {
	const ttl = 10 * time.Second
	for _, factor := range []float64{0, 0.01, 0.05} { // 0 selects the default 0.01
		clk := &fakeClock{now: time.Unix(1000, 0)}
		// Node 0 answers "contended" at once; nodes 1 and 2 each take 300 ms
		// and are both needed for the majority: elapsed is exactly 600 ms.
		stores, _ := fakeNodes(clk, []time.Duration{0, 300 * time.Millisecond, 300 * time.Millisecond}, 1)
		s, err := redlock.New(stores, &redlock.Options{DriftFactor: factor, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() }) // its workers (goleak)
		c := newClient(t, s, dlock.WithClock(clk), dlock.WithTTL(ttl))
		l, err := c.TryLock(context.Background(), "k")
		if err != nil {
			t.Fatalf("factor %v: TryLock: %v", factor, err)
		}
		f := factor
		if f == 0 {
			f = redlock.DefaultDriftFactor
		}
		want := ttl - 600*time.Millisecond - (time.Duration(float64(ttl)*f) + 2*time.Millisecond)
		if got := l.Remaining(); got != want {
			t.Errorf("factor %v: Remaining = %v, want TTL − elapsed − drift = %v", f, got, want)
		}
		_ = l.Release(context.Background())
	}
}

// TestLateGrantRejected: a majority that granted only after the validity
// ran out is not a lock; every node that granted is released.
func TestLateGrantRejected(t *testing.T) {
	const ttl = time.Second
	clk := &fakeClock{now: time.Unix(1000, 0)}
	stores, nodes := fakeNodes(clk, []time.Duration{500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}, 0)
	// The cleanup is bounded by the node timeout in real time (min of
	// NodeTimeout and TTL/3): the default 50 ms is too tight for a loaded
	// 2-core machine under -race.
	s, err := redlock.New(stores, &redlock.Options{Clock: clk, NodeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.Acquire(context.Background(), "k", "tok", ttl)
	if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, redlock.ErrValidityElapsed) {
		t.Fatalf("Acquire after %v of a %v lease = %v, want ErrNotAcquired and ErrValidityElapsed", 2*500*time.Millisecond, ttl, err)
	}
	released := int64(0)
	for _, n := range nodes {
		released += n.releases.Load()
	}
	if released < 2 {
		t.Fatalf("%d releases after a late grant, want one per granting node (≥ 2)", released)
	}
	// A node that answered after the majority was known is released by its
	// own goroutine, after Acquire returned: wait for it, for less than the
	// nodes' real-time TTL, so that only a release (not expiry) frees it.
	for i, st := range stores {
		waitFor(t, ttl/2, fmt.Sprintf("node %d to drop the late grant", i), func() bool {
			_, err := st.(*slowNode).Mutex.Acquire(context.Background(), "k", "other", ttl)
			return err == nil
		})
	}
}

// TestContendedEverywhereSendsNoRelease: when every node answered
// "contended", nothing changed anywhere and no cleanup round trip is spent.
func TestContendedEverywhereSendsNoRelease(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	stores, nodes := fakeNodes(clk, make([]time.Duration, 5), 5)
	// Every node must answer within the node timeout, or its state is
	// unknown and a release is the right thing to send: the default 50 ms
	// is too tight for a loaded 2-core machine under -race.
	s, _ := redlock.New(stores, &redlock.Options{Clock: clk, NodeTimeout: time.Second})
	t.Cleanup(func() { _ = s.Close() })
	_, err := s.Acquire(context.Background(), "k", "tok", time.Second)
	var ce *driver.ContendedError
	if !errors.As(err, &ce) || ce.Remaining != time.Second {
		t.Fatalf("Acquire = %v, want *ContendedError with Remaining 1s", err)
	}
	for i, n := range nodes {
		if r := n.releases.Load(); r != 0 {
			t.Errorf("node %d got %d releases, want 0", i, r)
		}
	}
}
