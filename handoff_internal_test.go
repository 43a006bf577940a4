package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit"
)

// miniStore is a minimal in-memory Transferer for tests inside the package
// (memstore cannot be imported here: it imports dlock). onTransfer runs
// before each transfer.
type miniStore struct {
	mu         sync.Mutex
	owner      map[string]string
	holds      map[string]int
	fence      map[string]uint64
	calls      atomic.Int64
	onTransfer func()
}

func newMiniStore() *miniStore {
	return &miniStore{owner: map[string]string{}, holds: map[string]int{}, fence: map[string]uint64{}}
}

func (s *miniStore) Acquire(_ context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.owner[key] {
	case "":
		s.fence[key]++
		s.owner[key], s.holds[key] = token, 1
	case token:
		s.holds[key]++
	default:
		return driver.Grant{}, &ContendedError{Remaining: time.Minute}
	}
	return driver.Grant{Fence: s.fence[key], Holds: s.holds[key], TTL: ttl}, nil
}

func (s *miniStore) Extend(_ context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner[key] != token {
		return driver.Grant{}, fmt.Errorf("%w: %w", ErrNotHeld, ErrTaken)
	}
	return driver.Grant{Fence: s.fence[key], Holds: s.holds[key], TTL: ttl}, nil
}

func (s *miniStore) Release(_ context.Context, key, token string) error {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner[key] != token {
		return fmt.Errorf("%w: %w", ErrNotHeld, ErrTaken)
	}
	if s.holds[key]--; s.holds[key] == 0 {
		s.owner[key] = ""
	}
	return nil
}

func (s *miniStore) Transfer(_ context.Context, key, from, to string, ttl time.Duration) (driver.Grant, error) {
	s.calls.Add(1)
	if s.onTransfer != nil {
		s.onTransfer()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner[key] != from {
		return driver.Grant{}, fmt.Errorf("%w: %w", ErrNotHeld, ErrTaken)
	}
	if s.holds[key] != 1 {
		return driver.Grant{}, invalidf("re-entered")
	}
	s.fence[key]++
	s.owner[key] = to
	return driver.Grant{Fence: s.fence[key], Holds: 1, TTL: ttl}, nil
}

func (s *miniStore) holder(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owner[key]
}

// waitQueued polls until n waiters are queued locally for key.
func waitQueued(t *testing.T, c *Client, key string, n int) {
	t.Helper()
	testkit.WaitFor(t, 5*time.Second, fmt.Sprintf("%d waiters queued for %q", n, key), func() bool {
		c.queues.mu.Lock()
		defer c.queues.mu.Unlock()
		q := c.queues.m[key]
		return q != nil && len(q.waiters) == n || q == nil && n == 0
	})
}

func lockAsync(c *Client, ctx context.Context, key string) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		l, err := c.Lock(ctx, key)
		ch <- lockResult{l, err}
	}()
	return ch
}

type lockResult struct {
	l   *Lease
	err error
}

// A waiter whose context ends while the lock is being handed to it takes
// the lease and passes it on: the next waiter gets the lock, nothing leaks.
// The waiter may also see the handoff complete first (then it simply holds
// the lock); the round repeats until the cancellation path was taken.
func TestHandoffToWaiterCancelledMidTransfer(t *testing.T) {
	st := newMiniStore()
	c, err := New(st)
	if err != nil {
		t.Fatal(err)
	}
	cancelled := 0
	for round := 0; round < 50 && cancelled == 0; round++ {
		if handoffCancelRound(t, c, st, fmt.Sprintf("k%d", round)) {
			cancelled++
		}
	}
	if cancelled == 0 {
		t.Fatal("in 50 rounds the waiter never saw its cancellation during a handoff")
	}
}

func handoffCancelRound(t *testing.T, c *Client, st *miniStore, key string) (cancelled bool) {
	ctx := context.Background()
	l0, err := c.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	actx, cancelA := context.WithCancel(ctx)
	defer cancelA()
	a := lockAsync(c, actx, key)
	waitQueued(t, c, key, 1)
	b := lockAsync(c, ctx, key)
	waitQueued(t, c, key, 2)
	var once sync.Once
	st.onTransfer = func() { once.Do(cancelA) } // A gives up while the lock travels to it
	defer func() { st.onTransfer = nil }()
	if err := l0.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ra := <-a
	switch {
	case ra.err == nil:
		if err := ra.l.Release(ctx); err != nil { // won the race: held, then passed on
			t.Fatal(err)
		}
	case !errors.Is(ra.err, ErrNotAcquired) || !errors.Is(ra.err, context.Canceled):
		t.Fatalf("cancelled waiter: %v", ra.err)
	default:
		cancelled = true
	}
	rb := <-b
	if rb.err != nil {
		t.Fatalf("next waiter: %v", rb.err)
	}
	if rb.l.Fence() <= l0.Fence() || st.holder(key) != rb.l.Token() {
		t.Fatalf("next waiter holds fence %d (previous %d), store owner matches: %v", rb.l.Fence(), l0.Fence(), st.holder(key) == rb.l.Token())
	}
	if err := rb.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h := st.holder(key); h != "" {
		t.Fatal("lock still held after every lease was released")
	}
	return cancelled
}

// A handoff is one store call: no release and acquire pair; and a TryLock
// while a local lease holds the key makes no call at all.
func TestHandoffCostsOneCallAndTryLockNone(t *testing.T) {
	st := newMiniStore()
	c, err := New(st, WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l0, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	before := st.calls.Load()
	var ce *ContendedError
	if _, err := c.TryLock(ctx, "k"); !errors.As(err, &ce) || ce.Remaining <= 0 {
		t.Fatalf("TryLock on a locally held key: %v", err)
	}
	w := lockAsync(c, ctx, "k")
	waitQueued(t, c, "k", 1)
	if err := l0.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-w
	if r.err != nil {
		t.Fatal(r.err)
	}
	if calls := st.calls.Load() - before; calls != 1 {
		t.Fatalf("TryLock + handoff made %d store calls, want 1 (the transfer)", calls)
	}
	if r.l.Token() == l0.Token() || r.l.Fence() != l0.Fence()+1 {
		t.Fatalf("handed-off lease: same token %v, fence %d after %d", r.l.Token() == l0.Token(), r.l.Fence(), l0.Fence())
	}
	_ = r.l.Release(ctx)
}

// A lost lease passes the local slot on: the next waiter is not stuck
// behind a holder that no longer holds anything.
func TestLostLeasePassesTheSlot(t *testing.T) {
	st := newMiniStore()
	c, err := New(st)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l0, err := c.Lock(ctx, "k", WithTTL(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	w := lockAsync(c, wctx, "k")
	waitQueued(t, c, "k", 1)
	// The store forgets the holder (as a Redis key would expire) and the
	// local validity runs out: the lease is lost and the waiter goes on.
	st.mu.Lock()
	st.owner["k"] = ""
	st.mu.Unlock()
	<-l0.Done()
	r := <-w
	if r.err != nil {
		t.Fatalf("waiter behind a lost lease: %v", r.err)
	}
	_ = r.l.Release(ctx)
}

func (s *miniStore) Model() driver.Model { return driver.Model{MinTTL: time.Millisecond} }
