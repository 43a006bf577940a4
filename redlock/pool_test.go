package redlock_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
	"example.com/dlock/redlock"
)

// TestSteadyStateStartsNoGoroutine: once warmed up, sequential
// Acquire+Release calls over 5 real nodes run every node call on the
// store's workers and start no goroutine. The pool grows to the peak number
// of node calls in flight it has met: the nodes a call did not wait for
// still run when the next call starts, and when a node process or the
// goroutines that ran its calls are not scheduled for a few milliseconds
// (2 cores, 5 servers, -race), the calls to it pile up. Such a stall can
// raise the peak, and start goroutines, in any round, so the test asks for
// one round without a start among up to thirty. A goroutine per node per call
// starts at least 13 per cycle (acquire, fence raise, release) in every
// round.
func TestSteadyStateStartsNoGoroutine(t *testing.T) {
	c := startCluster(t, 5)
	s := c.store(t, &redlock.Options{NodeTimeout: time.Second})
	ctx, tok := testCtx(t), newToken()
	cycle := func() {
		if _, err := s.Acquire(ctx, "steady", tok, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, "steady", tok); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 {
		cycle()
	}
	const rounds, cycles = 30, 100
	var started []int64
	for range rounds {
		before := redlock.GoroutinesStarted(s)
		for range cycles {
			cycle()
		}
		started = append(started, redlock.GoroutinesStarted(s)-before)
		if started[len(started)-1] == 0 {
			t.Logf("goroutines started per round of %d cycles: %v; %d workers live", cycles, started, redlock.LiveWorkers(s))
			return
		}
	}
	t.Fatalf("goroutines started per round of %d Acquire+Release cycles: %v, want a round with 0", cycles, started)
}

// newMemRedlock returns a Redlock store over n memstore nodes, closed at
// the end of the test; wrap, if not nil, wraps node i.
func newMemRedlock(t *testing.T, n int, opts *redlock.Options, wrap func(i int, s driver.Mutex) driver.Mutex) *redlock.Store {
	t.Helper()
	var nodes []driver.Mutex
	for i := range n {
		var s driver.Mutex = memstore.New(nil)
		if wrap != nil {
			s = wrap(i, s)
		}
		nodes = append(nodes, s)
	}
	s, err := redlock.New(nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// acquireRelease takes and gives back key once on s.
func acquireRelease(t *testing.T, s *redlock.Store, key string) {
	t.Helper()
	tok := newToken()
	if _, err := s.Acquire(testCtx(t), key, tok, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(testCtx(t), key, tok); err != nil {
		t.Fatal(err)
	}
}

// TestIdleWorkersExit: workers left without a task for the idle period
// exit, although the store is never closed; the next call starts new ones.
func TestIdleWorkersExit(t *testing.T) {
	s := newMemRedlock(t, 5, nil, nil)
	redlock.SetWorkerIdle(s, 200*time.Millisecond)
	acquireRelease(t, s, "idle")
	if n := redlock.LiveWorkers(s); n == 0 {
		t.Fatal("no live worker right after a call")
	}
	waitFor(t, 5*time.Second, "idle workers to exit", func() bool { return redlock.LiveWorkers(s) == 0 })
	before := redlock.GoroutinesStarted(s)
	acquireRelease(t, s, "idle")
	if redlock.GoroutinesStarted(s) == before || redlock.LiveWorkers(s) == 0 {
		t.Fatal("a call after the workers exited started none")
	}
}

// TestCloseStopsWorkers: Close ends the workers at once, however long their
// idle period, and calls after Close still work, on one-off goroutines.
func TestCloseStopsWorkers(t *testing.T) {
	s := newMemRedlock(t, 5, nil, nil)
	redlock.SetWorkerIdle(s, time.Hour)
	acquireRelease(t, s, "close")
	if redlock.LiveWorkers(s) == 0 {
		t.Fatal("no live worker right after a call")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "workers to exit after Close", func() bool { return redlock.LiveWorkers(s) == 0 })
	before := redlock.GoroutinesStarted(s)
	acquireRelease(t, s, "close")
	if n := redlock.LiveWorkers(s); n != 0 {
		t.Fatalf("%d workers live after a call made after Close, want 0", n)
	}
	if n := redlock.GoroutinesStarted(s) - before; n < 5 {
		t.Fatalf("a call after Close started %d goroutines, want one-offs for its node calls", n)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// blockingNode is a node whose Acquire blocks until unblock is closed (or
// its context ends), counting the calls in progress.
type blockingNode struct {
	driver.Mutex
	unblock <-chan struct{}
	blocked atomic.Int64
}

func (n *blockingNode) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	n.blocked.Add(1)
	defer n.blocked.Add(-1)
	select {
	case <-n.unblock:
	case <-ctx.Done():
		return driver.Grant{}, ctx.Err()
	}
	return n.Mutex.Acquire(ctx, key, token, ttl)
}

// TestSlowNodeHoldsUpNothingElse: with one of five nodes blocked, many
// concurrent callers, more than the worker cap, all get their lock from the
// other nodes while every one of their calls to the blocked node is still
// in progress: a slow node holds up neither the other nodes nor other
// callers, and the cap costs no concurrency.
func TestSlowNodeHoldsUpNothingElse(t *testing.T) {
	const callers, workerCap = 12, 3
	unblock := make(chan struct{})
	slow := &blockingNode{unblock: unblock}
	// The node timeout is far beyond the test's own deadline: a caller that
	// waited for the blocked node would be caught, not rescued by it.
	s := newMemRedlock(t, 5, &redlock.Options{NodeTimeout: time.Minute}, func(i int, s driver.Mutex) driver.Mutex {
		if i > 0 {
			return s
		}
		slow.Mutex = s
		return slow
	})
	redlock.SetWorkerCap(s, workerCap)
	defer close(unblock) // the blocked calls end before the test's Cleanup and goleak
	errs := make(chan error, callers)
	for i := range callers {
		go func() {
			_, err := s.Acquire(context.Background(), fmt.Sprintf("slow%d", i), newToken(), time.Minute)
			errs <- err
		}()
	}
	deadline := time.After(10 * time.Second)
	for range callers {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("Acquire with one node blocked = %v", err)
			}
		case <-deadline:
			t.Fatalf("callers held up by the blocked node: %d calls to it in progress", slow.blocked.Load())
		}
	}
	waitFor(t, 5*time.Second, "every caller's call to the blocked node in progress", func() bool {
		return slow.blocked.Load() == callers
	})
	if n := redlock.LiveWorkers(s); n > workerCap {
		t.Fatalf("%d live workers, cap %d", n, workerCap)
	}
	t.Logf("%d goroutines started, %d of them live workers", redlock.GoroutinesStarted(s), redlock.LiveWorkers(s))
}

// gatedNotifier is a memstore node whose Subscribe waits for gate and
// counts the subscriptions made and those still open.
type gatedNotifier struct {
	*memstore.Store
	gate       <-chan struct{}
	made, open *atomic.Int64
	callers    *goroutineSet
}

func (g gatedNotifier) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	g.callers.add()
	<-g.gate
	ch, cancel, err := g.Store.Subscribe(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	g.made.Add(1)
	g.open.Add(1)
	return ch, func() { g.open.Add(-1); cancel() }, nil
}

// goroutineSet records which goroutines called it, by the ID in their stack
// trace (test-only: Go has no goroutine identity API).
type goroutineSet struct {
	mu    sync.Mutex
	seen  map[string]bool
	fresh int // calls from goroutines not seen before, since last reset
}

// reset returns fresh and sets it to zero.
func (g *goroutineSet) reset() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.fresh
	g.fresh = 0
	return n
}

func (g *goroutineSet) add() {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.seen[id] {
		g.seen[id] = true
		g.fresh++
	}
}

// TestSubscribeRunsOnWorkersAndCancelsLateOnes: Subscribe returns once a
// majority subscribed; a node that subscribes after that has its
// subscription cancelled at once, and cancel ends the others, so none is
// left open. After warm-up, the node subscriptions start no goroutine (the
// one that merges the wake-ups is per Subscribe, not per node).
func TestSubscribeRunsOnWorkersAndCancelsLateOnes(t *testing.T) {
	var made, open atomic.Int64
	callers := &goroutineSet{seen: map[string]bool{}}
	open3 := make(chan struct{})
	openNow := make(chan struct{})
	close(openNow)
	nodes := []driver.Mutex{
		gatedNotifier{memstore.New(time.Now), openNow, &made, &open, callers},
		gatedNotifier{memstore.New(time.Now), openNow, &made, &open, callers},
		gatedNotifier{memstore.New(time.Now), open3, &made, &open, callers},
	}
	s, err := redlock.New(nodes, &redlock.Options{NodeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := testCtx(t)
	_, cancel, err := s.Subscribe(ctx, "k")
	if err != nil {
		t.Fatalf("subscribe with a majority: %v", err)
	}
	if n := made.Load(); n != 2 {
		t.Fatalf("%d subscriptions made before the third node's gate opened, want 2", n)
	}
	close(open3) // the third node subscribes late
	waitFor(t, 5*time.Second, "the late subscription", func() bool { return made.Load() == 3 })
	waitFor(t, 5*time.Second, "the late subscription cancelled", func() bool { return open.Load() == 2 })
	cancel()
	if n := open.Load(); n != 0 {
		t.Fatalf("%d subscriptions left open after cancel", n)
	}
	// The pool grows to the node calls it meets in flight (a worker parks
	// only after handing its reply over, so the next call may find it busy);
	// then a round of calls runs every node subscription on a goroutine that
	// ran one before. A goroutine per node per call is new every time.
	quiet := false
	for round := 0; round < 30 && !quiet; round++ {
		callers.reset()
		for range 20 {
			_, cancel, err := s.Subscribe(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		quiet = callers.reset() == 0
	}
	if !quiet {
		t.Errorf("every one of 30 rounds of 20 Subscribe calls ran node subscriptions on new goroutines")
	}
	// The last calls' third subscriptions may still be landing: each is
	// cancelled as it lands.
	waitFor(t, 5*time.Second, "every subscription closed", func() bool { return open.Load() == 0 })
}
