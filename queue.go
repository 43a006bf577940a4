package dlock

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Local queueing. The waiters of one Client for one key line up in a FIFO
// queue in the process, as Spring's RedisLockRegistry does, so that only the
// head of the queue talks to the store: the others cost no round trip and no
// subscription, and a release is followed by one store call from this
// process instead of a stampede of them. The head keeps its place (the
// "slot") while it holds the lease and passes it on when the lease ends.
//
// Local handoff: when the slot's lease is released while another waiter is
// queued and the store is a driver.Transferer, the lock passes to that waiter in a
// single store call (Transfer) instead of a release and an acquire. The
// handoff is a new holding with its own owner token and a new, greater
// fence, so fencing stays exact: a delayed write of the previous holder
// carries a lower fence and is rejected by a fenced resource. No release is
// published during a handoff, so other processes' waiters are not woken.
//
// Fairness between processes: after maxHandoffs consecutive handoffs, or
// once a run of handoffs has lasted its time bound, the lock is released for
// real (waking other processes' waiters), and if other owners were seen
// holding the key, the next local waiter yields for a moment before its own
// attempt so that a remote waiter can take the key. The count bounds the
// run when critical sections are short (each run end costs a release, a
// pub/sub wake-up and the yield, so a run must be long enough to pay for
// them); the time bounds how long another process waits when they are long.
// The time bound is maxHandoffRun, or handoffRunCalls times the last
// handoff's store call if that is longer, up to maxHandoffRunGrown: a run
// end costs a few of the store's round trips, which on etcd (a write
// fsynced by a quorum, about a millisecond) are ten times Redis's, so the
// run grows with them; the cap keeps one slow call (a loaded machine) from
// making other processes wait for long.
//
// On a store that can neither announce a release (driver.Notifier) nor
// queue waiters (driver.Queuer), another process's waiter learns that the
// key is free only at its next poll (the MariaDB lease table: its marked
// waiter polls every millisecond or more, and the key is reserved for it
// meanwhile), so a run end costs a poll's spacing and round trip on top of
// the release: such runs last at least maxHandoffRunPolled. Measured on
// MariaDB (bench/sql 2x25, 2026-11-24): 5 ms runs 0.98x and 1.22x the
// polling table's throughput, 15 ms runs 1.00-1.56x (median 1.42x), with
// every process served.
//
// The queue is an optimisation, never a guarantee: exclusion is the store's.
// Callers that acquire as an explicit Owner (ContextWithOwner) bypass the
// queue: that owner may already hold the key (re-entry) and must not queue
// behind a waiter that is itself waiting for the owner's release.

// maxHandoffs and maxHandoffRun bound a run of consecutive local handoffs
// of one key, counted from its first handoff.
const (
	maxHandoffs        = 64
	maxHandoffRun      = 5 * time.Millisecond
	handoffRunCalls    = 16
	maxHandoffRunGrown = 25 * time.Millisecond
	// maxHandoffRunPolled is the least time bound of a run on a store
	// without release notifications or a queue (see above).
	maxHandoffRunPolled = 15 * time.Millisecond
)

// yieldFor is how long a local successor waits after a capped run of
// handoffs on a key other processes want: long enough for a remote waiter's
// pub/sub wake-up and acquire on a LAN, short next to a lease.
const yieldFor = 500 * time.Microsecond

type queues struct {
	mu     sync.Mutex
	m      map[string]*keyQueue
	minRun time.Duration // the least time bound of a run beyond maxHandoffRun (maxHandoffRunPolled or 0)
}

// keyQueue is the local state of one key. Guarded by queues.mu.
type keyQueue struct {
	busy     bool          // the slot is taken: its owner is acquiring or holding
	lease    *Lease        // the slot owner's lease once acquired
	waiters  []*queued     // FIFO
	handoffs int           // consecutive local handoffs
	runStart time.Time     // when the first of them was made
	cost     time.Duration // how long the last handoff's store call took
	capped   bool          // the run reached a bound: the slot owner released to the store
	remote   bool          // another owner was seen holding the key
}

type queued struct {
	cfg     config
	ready   chan struct{} // receives once when the slot is granted
	granted bool
	yield   bool
	lease   *Lease // set if the lock was handed off: already held
}

// enter takes the slot for key, waiting in line behind the other local
// waiters. It returns the queue, the lease if the lock was handed over while
// queued, and whether to yield before the first attempt; or ctx's error if
// ctx ended first (holding nothing then).
func (qs *queues) enter(ctx context.Context, key string, cfg config) (*keyQueue, *Lease, bool, error) {
	qs.mu.Lock()
	q := qs.get(key)
	if !q.busy {
		q.busy = true
		qs.mu.Unlock()
		return q, nil, false, nil
	}
	w := &queued{cfg: cfg, ready: make(chan struct{}, 1)}
	q.waiters = append(q.waiters, w)
	qs.mu.Unlock()
	select {
	case <-w.ready:
		return q, w.lease, w.yield, nil
	case <-ctx.Done():
	}
	qs.mu.Lock()
	if !w.granted {
		for i, x := range q.waiters {
			if x == w {
				q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
				break
			}
		}
		qs.mu.Unlock()
		return nil, nil, false, ctx.Err()
	}
	qs.mu.Unlock()
	// Granted as we gave up: a handoff may be in flight (one store call);
	// take what it brings and pass it on.
	<-w.ready
	if w.lease != nil {
		w.lease.silence() // its grant is not reported: neither is its end
		rctx, cancel := releaseContext(ctx, w.lease.ttl)
		_ = w.lease.Release(rctx)
		cancel()
	} else {
		qs.leave(key, q, false)
	}
	return nil, nil, false, ctx.Err()
}

// tryEnter takes the slot only if it is free. Otherwise it returns the local
// holder's lease, if there is one, for its remaining time.
func (qs *queues) tryEnter(key string) (*keyQueue, *Lease) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := qs.get(key)
	if q.busy {
		return nil, q.lease
	}
	q.busy = true
	return q, nil
}

func (qs *queues) get(key string) *keyQueue {
	if qs.m == nil {
		qs.m = make(map[string]*keyQueue)
	}
	q := qs.m[key]
	if q == nil {
		q = keyQueuePool.Get().(*keyQueue)
		qs.m[key] = q
	}
	return q
}

// keyQueuePool recycles the queues of keys that fell idle: an uncontended
// lock+unlock then allocates none.
var keyQueuePool = sync.Pool{New: func() any { return new(keyQueue) }}

// leave gives up the slot: to the next local waiter, who then acquires from
// the store itself, or frees the key's queue. released says the slot owner
// held the lock and released it to the store.
func (qs *queues) leave(key string, q *keyQueue, released bool) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q.lease = nil
	capped := q.capped
	q.handoffs, q.capped = 0, false
	w := qs.pop(key, q)
	if w == nil {
		return
	}
	w.yield = released && capped && q.remote
	w.ready <- struct{}{}
}

// pop removes the next waiter and marks it granted, or frees the queue if
// nobody waits. Called with qs.mu held.
func (qs *queues) pop(key string, q *keyQueue) *queued {
	if len(q.waiters) == 0 {
		q.busy = false
		if qs.m[key] == q {
			delete(qs.m, key)
			// Nothing refers to q any more: no waiters, no slot owner (a
			// released lease never touches its slot again).
			*q = keyQueue{waiters: q.waiters[:0]}
			keyQueuePool.Put(q)
		}
		return nil
	}
	w := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	w.granted = true
	return w
}

// handoffTarget pops the waiter a releasing slot owner may hand the lock to
// at now, or returns nil if nobody waits or the run of handoffs reached a
// bound.
func (qs *queues) handoffTarget(key string, q *keyQueue, now time.Time) *queued {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if len(q.waiters) == 0 {
		return nil
	}
	if q.handoffs == 0 {
		q.runStart = now
	} else if q.handoffs >= maxHandoffs || now.Sub(q.runStart) >= q.runBound(qs.minRun) {
		q.capped = true
		return nil
	}
	q.lease = nil
	q.handoffs++
	return qs.pop(key, q)
}

// runBound is how long a run of handoffs may last (see maxHandoffRun).
// Called with qs.mu held.
func (q *keyQueue) runBound(minRun time.Duration) time.Duration {
	return max(maxHandoffRun, minRun, min(handoffRunCalls*q.cost, maxHandoffRunGrown))
}

// deliver completes a handoff to w, a waiter popped from q: with the lease
// if the transfer succeeded, or with nil, and w then acquires from the store
// itself. took is how long the handoff's store call took.
func (qs *queues) deliver(q *keyQueue, w *queued, l *Lease, took time.Duration) {
	qs.mu.Lock()
	w.lease = l
	q.cost = took
	qs.mu.Unlock()
	w.ready <- struct{}{}
}

// held records the slot owner's lease.
func (qs *queues) held(q *keyQueue, l *Lease) {
	qs.mu.Lock()
	q.lease = l
	qs.mu.Unlock()
}

// contended records whether another owner was seen holding the key.
func (qs *queues) contended(q *keyQueue, remote bool) {
	qs.mu.Lock()
	q.remote = remote
	qs.mu.Unlock()
}

// yieldDelay is yieldFor with jitter.
func yieldDelay() time.Duration {
	return yieldFor/2 + rand.N(yieldFor/2+1)
}
