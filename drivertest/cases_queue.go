package drivertest

import (
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases for driver.Queuer.

// queued is the outcome of one AcquireQueued.
type queued struct {
	i   int
	g   driver.Grant
	err error
}

func queuer(t *testing.T, m driver.Mutex) driver.Queuer {
	q, ok := driver.As[driver.Queuer](m)
	if !ok {
		t.Skip("store does not implement driver.Queuer")
	}
	return q
}

// waiterCounter returns the store's WaiterCounter, skipping without one:
// the queue cases need it to know that a waiter is in the queue.
func waiterCounter(t *testing.T, m driver.Mutex) driver.WaiterCounter {
	wc, ok := driver.As[driver.WaiterCounter](m)
	if !ok {
		t.Skip("a Queuer without driver.WaiterCounter: cannot tell when a waiter is queued")
	}
	return wc
}

// receive waits up to d for one outcome.
func receive(t *testing.T, ch <-chan queued, d time.Duration, what string) queued {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("%s: no AcquireQueued returned within %v", what, d)
		return queued{}
	}
}

// testQueueFIFO: waiters queued one after the other on different clients
// get the key in the order they queued (driver.Queuer: "waiters are served
// in order across every process").
func (s *suite) testQueueFIFO(t *testing.T, m driver.Mutex) {
	queuer(t, m)
	wc := waiterCounter(t, m)
	key := Key(t)
	holder := s.mustTok(t, m, key)
	const n = 3
	done := make(chan queued, n)
	clients, toks := make([]driver.Mutex, n), make([]string, n)
	for i := range n {
		clients[i], toks[i] = s.client(t), Token()
		q := queuer(t, clients[i])
		go func() {
			g, err := q.AcquireQueued(ctx(t), key, toks[i], s.long)
			done <- queued{i, g, err}
		}()
		s.waitWaiters(t, wc, key, i+1)
	}
	mustRelease(t, m, key, holder)
	var last uint64
	for want := range n {
		r := receive(t, done, s.slack+5*time.Second, "FIFO")
		if r.err != nil || r.i != want || r.g.Fence <= last || r.g.Holds != 1 {
			t.Fatalf("turn %d went to waiter %d: %+v, %v; want waiter %d with a greater fence than %d", want, r.i, r.g, r.err, want, last)
		}
		last = r.g.Fence
		s.wantContended(t, m, key)
		mustRelease(t, clients[r.i], key, toks[r.i])
	}
	s.wantFree(t, m, key)
}

// testQueueCancel: a waiter whose context ends returns an error and leaves
// nothing: the waiter count drops, and when the holder releases, the key is
// free for anyone at once.
func (s *suite) testQueueCancel(t *testing.T, m driver.Mutex) {
	queuer(t, m)
	wc := waiterCounter(t, m)
	key := Key(t)
	holder := s.mustTok(t, m, key)
	q := queuer(t, s.client(t))
	wctx, cancel := contextWithCancel(t)
	done := make(chan queued, 1)
	go func() {
		g, err := q.AcquireQueued(wctx, key, Token(), s.long)
		done <- queued{0, g, err}
	}()
	s.waitWaiters(t, wc, key, 1)
	cancel()
	if r := receive(t, done, s.slack+5*time.Second, "cancelled"); r.err == nil {
		t.Fatalf("a cancelled AcquireQueued returned %+v, no error", r.g)
	}
	s.waitWaiters(t, wc, key, 0)
	mustRelease(t, m, key, holder)
	s.wantFree(t, s.client(t), key)
}

// testQueueExpiry: a queued waiter gets the key when the holder's lease (or
// session, through Harness.Kill) ends, not before, with a greater fence.
func (s *suite) testQueueExpiry(t *testing.T, m driver.Mutex) {
	queuer(t, m)
	key := Key(t)
	ttl, limit := s.ttl, s.ttl+s.slack
	if s.model.Session {
		if s.h.Kill == nil {
			t.Skip("session store without Harness.Kill: cannot end the holder's session")
		}
		ttl, limit = 0, s.model.SessionTTL+s.slack
	}
	start := time.Now()
	g := mustAcquire(t, m, key, Token(), max(ttl, s.ttl))
	q := queuer(t, s.client(t))
	done := make(chan queued, 1)
	go func() {
		g, err := q.AcquireQueued(ctx(t), key, Token(), s.long)
		done <- queued{0, g, err}
	}()
	if s.model.Session {
		s.kill(t, m)
	}
	r := receive(t, done, limit+5*time.Second, "holder's lease ended")
	el := time.Since(start)
	if r.err != nil || r.g.Fence <= g.Fence {
		t.Fatalf("AcquireQueued = %+v, %v; want the key with a fence greater than %d", r.g, r.err, g.Fence)
	}
	if el > limit || el < ttl-early {
		t.Fatalf("queued waiter got the key %v after a %v lease began; want between %v and %v", el, ttl, ttl-early, limit)
	}
}
