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
// subscription, and a release is followed by exactly one acquire from this
// process instead of a stampede of them. The head keeps its place (the
// "slot") while it holds the lease and hands it to the next waiter when the
// lease ends: after the store's release has returned, so the successor's
// single acquire finds the key free.
//
// The queue is an optimisation, never a guarantee: exclusion is the store's.
// The lock itself is always released to the store and re-acquired, so every
// holding gets its own fence; there is no local handoff of a held lock.
//
// Callers that acquire as an explicit Owner (ContextWithOwner) bypass the
// queue: that owner may already hold the key (re-entry) and must not queue
// behind a waiter that is itself waiting for the owner's release.
//
// Fairness between processes: a successor that takes the key straight from a
// local release wins against a remote waiter woken by pub/sub. After
// maxStreak such local successions on a key that other owners were seen to
// want, the next successor yields for a moment before its attempt so that a
// remote waiter can take the key; if nobody did, the key is marked as
// uncontended again and local successions continue without yielding.

// maxStreak is how many consecutive local successions a key may see while
// other processes want it before a successor yields.
const maxStreak = 4

// yieldFor is how long a yielding successor waits: long enough for a remote
// waiter's pub/sub wake-up and acquire on a LAN, short next to a lease.
const yieldFor = time.Millisecond

type queues struct {
	mu sync.Mutex
	m  map[string]*keyQueue
}

// keyQueue is the local state of one key. Guarded by queues.mu.
type keyQueue struct {
	busy    bool      // the slot is taken: its owner is acquiring or holding
	lease   *Lease    // the slot owner's lease once acquired
	waiters []*queued // FIFO
	streak  int       // consecutive local successions
	remote  bool      // another owner was seen holding the key
}

type queued struct {
	ready   chan struct{} // receives when the slot is granted
	granted bool
	yield   bool
}

// enter takes the slot for key, waiting in line behind the other local
// waiters. It returns the queue and whether to yield before the first
// attempt, or ctx's error if ctx ended first (holding nothing then).
func (qs *queues) enter(ctx context.Context, key string) (*keyQueue, bool, error) {
	qs.mu.Lock()
	q := qs.get(key)
	if !q.busy {
		q.busy = true
		qs.mu.Unlock()
		return q, false, nil
	}
	w := &queued{ready: make(chan struct{}, 1)}
	q.waiters = append(q.waiters, w)
	qs.mu.Unlock()
	select {
	case <-w.ready:
		return q, w.yield, nil
	case <-ctx.Done():
	}
	qs.mu.Lock()
	if w.granted {
		qs.mu.Unlock()
		qs.leave(key, q, false) // granted as we gave up: pass it on
		return nil, false, ctx.Err()
	}
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			break
		}
	}
	qs.mu.Unlock()
	return nil, false, ctx.Err()
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
		q = &keyQueue{}
		qs.m[key] = q
	}
	return q
}

// leave gives up the slot: to the next local waiter, or frees the key's
// queue. succession says the slot owner held the lock and released it.
func (qs *queues) leave(key string, q *keyQueue, succession bool) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q.lease = nil
	if len(q.waiters) == 0 {
		q.busy = false
		if qs.m[key] == q {
			delete(qs.m, key)
		}
		return
	}
	w := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	w.granted = true
	if succession {
		q.streak++
	} else {
		q.streak = 0
	}
	if q.remote && q.streak >= maxStreak {
		w.yield = true
		q.streak = 0
	}
	w.ready <- struct{}{}
}

// held records the slot owner's lease; contended records that another owner
// held the key; uncontended clears that after a yield nobody used.
func (qs *queues) held(q *keyQueue, l *Lease) {
	qs.mu.Lock()
	q.lease = l
	qs.mu.Unlock()
}

func (qs *queues) contended(q *keyQueue, remote bool) {
	qs.mu.Lock()
	q.remote = remote
	qs.mu.Unlock()
}

// yieldDelay is yieldFor with jitter.
func yieldDelay() time.Duration {
	return yieldFor/2 + rand.N(yieldFor/2+1)
}
