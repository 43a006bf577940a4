package dlock_test

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
	"example.com/dlock/internal/testkit"
)

// queueStore is a minimal store with its own FIFO of waiters (a Queuer, as
// etcd and ZooKeeper have): a release hands the key to the head of the
// queue. It counts its calls and can fail AcquireQueued on demand.
type queueStore struct {
	mu      sync.Mutex
	owner   map[string]string
	holds   map[string]int
	fence   map[string]uint64
	waiting map[string][]*ticket

	acquires, queued, releases atomic.Int64
	// failNext makes the next AcquireQueued calls fail with these errors,
	// changing nothing; applyThenFail makes the next one grant, then fail
	// with its error (a lost reply).
	failNext      []error
	applyThenFail func(token string) error
}

type ticket struct {
	token   string
	granted chan struct{}
}

func newQueueStore() *queueStore {
	return &queueStore{owner: map[string]string{}, holds: map[string]int{}, fence: map[string]uint64{}, waiting: map[string][]*ticket{}}
}

func (s *queueStore) Model() driver.Model {
	return driver.Model{MinTTL: time.Millisecond, Granularity: time.Millisecond}
}

// take grants key to token if free or already token's. Called with s.mu held.
func (s *queueStore) take(key, token string, ttl time.Duration) (driver.Grant, bool) {
	switch s.owner[key] {
	case "":
		s.fence[key]++
		s.owner[key], s.holds[key] = token, 1
	case token:
		s.holds[key]++
	default:
		return driver.Grant{}, false
	}
	return driver.Grant{Fence: s.fence[key], Holds: s.holds[key], TTL: ttl}, true
}

func (s *queueStore) Acquire(_ context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	s.acquires.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.take(key, token, ttl); ok {
		return g, nil
	}
	return driver.Grant{}, &dlock.ContendedError{Remaining: -1}
}

func (s *queueStore) AcquireQueued(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	s.queued.Add(1)
	s.mu.Lock()
	if len(s.failNext) > 0 {
		err := s.failNext[0]
		s.failNext = s.failNext[1:]
		s.mu.Unlock()
		return driver.Grant{}, err
	}
	if f := s.applyThenFail; f != nil {
		s.applyThenFail = nil
		s.take(key, token, ttl)
		s.mu.Unlock()
		return driver.Grant{}, f(token)
	}
	if len(s.waiting[key]) == 0 {
		if g, ok := s.take(key, token, ttl); ok {
			s.mu.Unlock()
			return g, nil
		}
	}
	t := &ticket{token: token, granted: make(chan struct{})}
	s.waiting[key] = append(s.waiting[key], t)
	s.mu.Unlock()
	select {
	case <-t.granted:
		s.mu.Lock()
		defer s.mu.Unlock()
		return driver.Grant{Fence: s.fence[key], Holds: 1, TTL: ttl}, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-t.granted: // granted as we gave up: leave nothing
		s.releaseLocked(key, token)
	default:
		s.dequeue(key, t)
	}
	return driver.Grant{}, ctx.Err()
}

func (s *queueStore) dequeue(key string, t *ticket) {
	q := s.waiting[key]
	for i, x := range q {
		if x == t {
			s.waiting[key] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(s.waiting[key]) == 0 {
		delete(s.waiting, key)
	}
}

func (s *queueStore) Extend(_ context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner[key] != token {
		return driver.Grant{}, driver.NotHeld(s.owner[key] != "")
	}
	return driver.Grant{Fence: s.fence[key], Holds: s.holds[key], TTL: ttl}, nil
}

func (s *queueStore) Release(_ context.Context, key, token string) error {
	s.releases.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.releaseLocked(key, token)
}

// releaseLocked removes one hold and hands a freed key to the queue's head.
func (s *queueStore) releaseLocked(key, token string) error {
	if s.owner[key] != token {
		return driver.NotHeld(s.owner[key] != "")
	}
	if s.holds[key]--; s.holds[key] > 0 {
		return nil
	}
	delete(s.owner, key)
	delete(s.holds, key)
	if q := s.waiting[key]; len(q) > 0 {
		t := q[0]
		s.dequeue(key, t)
		s.take(key, t.token, time.Minute)
		close(t.granted)
	}
	return nil
}

// state reports key's holder and queue length.
func (s *queueStore) state(key string) (owner string, holds, queued int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owner[key], s.holds[key], len(s.waiting[key])
}

// awaitQueued polls until key's store queue has n waiters, within 5 s.
func (s *queueStore) awaitQueued(t *testing.T, key string, n int) {
	t.Helper()
	testkit.WaitFor(t, 5*time.Second, fmt.Sprintf("store queue of %q at %d waiters", key, n), func() bool {
		_, _, q := s.state(key)
		return q == n
	})
}

func newQueueClient(t *testing.T, s driver.Mutex, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	c, err := dlock.New(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// With a Queuer, waiters of different Clients wait in the store's queue and
// are served in arrival order, each with one store call: no polling.
func TestQueuerWaitersAreServedInOrder(t *testing.T) {
	const n = 5
	s := newQueueStore()
	ctx := testCtx(t)
	holder := mustLock(t, newQueueClient(t, s), ctx, "k")
	order := make(chan int, n)
	errs := make(chan error, n)
	for i := range n {
		c := newQueueClient(t, s) // one Client each: the local queue does not order them
		go func() {
			l, err := c.Lock(ctx, "k")
			if err != nil {
				errs <- err
				return
			}
			order <- i
			errs <- l.Release(ctx)
		}()
		s.awaitQueued(t, "k", i+1)
	}
	release(t, holder)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for want := range n {
		if got := <-order; got != want {
			t.Fatalf("waiter %d acquired in place %d: not FIFO", got, want)
		}
	}
	if a, q := s.acquires.Load(), s.queued.Load(); a != 0 || q != n+1 {
		t.Fatalf("store calls: %d Acquire, %d AcquireQueued; want 0 and %d (one per Lock)", a, q, n+1)
	}
}

// A Lock cancelled, or bounded by WithWait, while queued leaves nothing in
// the store: its queue entry is gone and the key passes to the next owner.
func TestQueuerCancelledWaitLeavesNothing(t *testing.T) {
	s := newQueueStore()
	ctx := testCtx(t)
	c := newQueueClient(t, s)
	holder := mustLock(t, newQueueClient(t, s), ctx, "k")
	cctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := c.Lock(cctx, "k")
		got <- err
	}()
	s.awaitQueued(t, "k", 1)
	cancel()
	if err := <-got; !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled queued Lock: %v, want ErrNotAcquired and context.Canceled", err)
	}
	if _, err := c.Lock(ctx, "k", dlock.WithWait(20*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued Lock past its wait bound: %v, want ErrNotAcquired (not the caller's deadline)", err)
	}
	if err := c.Close(ctx); err != nil { // waits for the background releases
		t.Fatal(err)
	}
	if owner, holds, queued := s.state("k"); owner != holder.Token() || holds != 1 || queued != 0 {
		t.Fatalf("after the cancelled waits: holds %d, queue %d, holder is ours: %v", holds, queued, owner == holder.Token())
	}
	release(t, holder)
	if owner, _, queued := s.state("k"); owner != "" || queued != 0 {
		t.Fatalf("key still held (%v) or queued (%d) after the holder's release", owner != "", queued)
	}
}

// An unavailable store is retried with the client's backoff (WithOnRetry is
// told); ErrRefused ends the wait at once; TryLock never queues.
func TestQueuerRetriesUnavailableAndStopsOnRefused(t *testing.T) {
	s := newQueueStore()
	ctx := testCtx(t)
	down := fmt.Errorf("%w: connection refused", dlock.ErrUnavailable)
	s.failNext = []error{down, down}
	var retries []error
	c := newQueueClient(t, s, dlock.WithBackoff(func(int) time.Duration { return time.Millisecond }),
		dlock.WithOnRetry(func(_ int, err error) { retries = append(retries, err) }))
	l := mustLock(t, c, ctx, "k")
	if len(retries) != 2 || !errors.Is(retries[0], dlock.ErrUnavailable) || s.queued.Load() != 3 {
		t.Fatalf("retries %v, %d AcquireQueued calls; want 2 unavailable retries and 3 calls", retries, s.queued.Load())
	}
	release(t, l)

	s.failNext = []error{fmt.Errorf("%w: NOPERM", dlock.ErrRefused)}
	before := s.queued.Load()
	if _, err := c.Lock(ctx, "k"); !errors.Is(err, dlock.ErrRefused) || s.queued.Load() != before+1 {
		t.Fatalf("refused: %v after %d calls, want ErrRefused after 1", err, s.queued.Load()-before)
	}

	holder := mustLock(t, c, ctx, "k")
	before = s.queued.Load()
	_, err := newQueueClient(t, s).TryLock(ctx, "k")
	var ce *dlock.ContendedError
	if !errors.As(err, &ce) || s.queued.Load() != before || s.acquires.Load() != 1 {
		t.Fatalf("TryLock: %v, %d queued calls, %d Acquire; want contention from one plain Acquire", err, s.queued.Load()-before, s.acquires.Load())
	}
	release(t, holder)
}

// A queued acquisition whose outcome is unknown (the store granted it, but
// the caller's context ended before the reply) is released in the
// background, as an unknown Acquire is.
func TestQueuerUnknownOutcomeIsReleased(t *testing.T) {
	s := newQueueStore()
	ctx := testCtx(t)
	c := newQueueClient(t, s)
	cctx, cancel := context.WithCancel(ctx)
	var granted atomic.Bool
	s.applyThenFail = func(string) error {
		granted.Store(true)
		cancel()
		return context.Canceled
	}
	if _, err := c.Lock(cctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock: %v, want context.Canceled", err)
	}
	if err := c.Close(ctx); err != nil { // waits for the background release
		t.Fatal(err)
	}
	if owner, _, _ := s.state("k"); !granted.Load() || owner != "" {
		t.Fatalf("granted %v; key still held after the background release: %v", granted.Load(), owner != "")
	}
}

// queueHidden is queueStore without its queue: the negative control, waiting
// by Acquire and backoff.
type queueHidden struct{ s *queueStore }

func (h queueHidden) Model() driver.Model { return h.s.Model() }
func (h queueHidden) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	return h.s.Acquire(ctx, key, token, ttl)
}
func (h queueHidden) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	return h.s.Extend(ctx, key, token, ttl)
}
func (h queueHidden) Release(ctx context.Context, key, token string) error {
	return h.s.Release(ctx, key, token)
}

// Negative control: without the Queuer, a waiter polls (several Acquire
// calls for one Lock) and never enters the store's queue.
func TestQueuerAbsentWaiterPolls(t *testing.T) {
	s := newQueueStore()
	ctx := testCtx(t)
	h := queueHidden{s}
	holder := mustLock(t, newQueueClient(t, h), ctx, "k")
	c := newQueueClient(t, h, dlock.WithBackoff(func(int) time.Duration { return time.Millisecond }))
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, "k")
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	waitFor(t, 5*time.Second, "4 Acquire calls", func() bool { return s.acquires.Load() >= 4 })
	release(t, holder)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if s.queued.Load() != 0 || s.acquires.Load() < 4 {
		t.Fatalf("%d queued calls, %d Acquire: want polling, no queue", s.queued.Load(), s.acquires.Load())
	}
}

// The local queue still serialises one Client's waiters: only its head
// enters the store's queue; the others wait in the process.
func TestQueuerLocalWaitersReachTheStoreOneAtATime(t *testing.T) {
	const n = 3
	s := newQueueStore()
	ctx := testCtx(t)
	holder := mustLock(t, newQueueClient(t, s), ctx, "k")
	c := newQueueClient(t, s)
	errs := make(chan error, n)
	for range n {
		go func() {
			l, err := c.Lock(ctx, "k")
			if err == nil {
				err = l.Release(ctx)
			}
			errs <- err
		}()
	}
	s.awaitQueued(t, "k", 1)
	waitFor(t, 5*time.Second, "the local queue", func() bool { return dlock.QueuedWaiters(c, "k") == n-1 })
	if _, _, q := s.state("k"); q != 1 || dlock.QueuedWaiters(c, "k") != n-1 {
		t.Fatalf("store queue %d, local queue %d; want 1 and %d", q, dlock.QueuedWaiters(c, "k"), n-1)
	}
	release(t, holder)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if q := s.queued.Load(); q > n+1 {
		t.Fatalf("%d AcquireQueued calls for %d Locks", q, n+1)
	}
}
