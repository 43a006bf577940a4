package dlock

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"example.com/dlock/driver"
)

// renewer is the one renewal loop of a Client. Leases wait in a queue ordered
// by their next renewal; a tick renews all that are due in one batch (one
// pipelined round trip when the store is a BatchExtender). Ticks run on a
// clock timer, and each schedules the next before it sends its batch: a
// batch that hangs holds up only its own leases (out of the queue until it
// settles, and bounded by their validity), while further ticks keep renewing
// the others on time. An idle client (or one whose leases come and go faster
// than they need renewing) has no goroutine and starts none per lease; a
// batch in flight occupies its timer's goroutine.
type renewer struct {
	c     *Client
	mu    sync.Mutex // may be taken before a lease's mutex, never after
	q     leaseQueue
	timer Timer     // the scheduled tick, if any
	at    time.Time // when it fires
	gen   uint64    // identifies the scheduled tick; stale ticks do nothing
}

func newRenewer(c *Client) *renewer {
	return &renewer{c: c}
}

// renewEvery is the renewal period of a lease of length ttl.
func renewEvery(ttl time.Duration) time.Duration { return ttl / 3 }

func (r *renewer) add(l *Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.push(l, renewEvery(l.ttl), renewEvery(l.ttl))
	r.schedule()
}

// push queues l for a renewal after wait; period is its renewal period.
// Called with r.mu held.
func (r *renewer) push(l *Lease, wait, period time.Duration) {
	l.next, l.period = r.c.cfg.clock.Now().Add(wait), period
	heap.Push(&r.q, l)
}

func (r *renewer) remove(l *Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.index >= 0 {
		// The scheduled tick stays: a lease taken soon after will most likely
		// not need an earlier one, so short-lived leases arm no timer at all.
		// A tick that finds nothing due costs one wake-up per period.
		heap.Remove(&r.q, int(l.index))
	}
}

// retune moves a queued lease's next renewal to one period of its new TTL
// from now, after an Extend set the key's expiry to ttl: a shorter TTL must
// be renewed sooner than the old period. A lease out of the queue is either
// not renewed automatically or being settled by a batch, which queues it
// with its current TTL.
func (r *renewer) retune(l *Lease, ttl time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.index < 0 {
		return
	}
	l.period = renewEvery(ttl)
	l.next = r.c.cfg.clock.Now().Add(l.period)
	heap.Fix(&r.q, int(l.index))
	r.schedule()
}

// schedule makes sure a tick is due no later than the earliest lease's
// renewal. Called with r.mu held.
func (r *renewer) schedule() {
	if len(r.q) == 0 {
		return
	}
	next := r.q[0].next
	if r.timer != nil {
		if !r.at.After(next) {
			return
		}
		r.timer.Stop()
	}
	r.gen++
	gen := r.gen
	r.at = next
	r.timer = r.c.cfg.clock.AfterFunc(next.Sub(r.c.cfg.clock.Now()), func() { r.tick(gen) })
}

// tick takes every due lease out of the queue, schedules the next tick for
// the others, then renews the due ones in one batch.
func (r *renewer) tick(gen uint64) {
	r.mu.Lock()
	if gen != r.gen {
		r.mu.Unlock()
		return
	}
	r.timer = nil
	due := r.due()
	r.schedule() // before the batch: it must not wait for this one
	r.mu.Unlock()
	if len(due) > 0 {
		r.renew(due)
	}
}

// due pops the leases whose renewal falls within a tenth of their period,
// so that leases taken close together are renewed in one batch. Called
// with r.mu held.
func (r *renewer) due() (due []*Lease) {
	now := r.c.cfg.clock.Now()
	for len(r.q) > 0 && r.q[0].next.Sub(now) <= r.q[0].period/10 {
		due = append(due, heap.Pop(&r.q).(*Lease))
	}
	return due
}

// renew renews due in one batch. A lease with an Extend under way is left
// to it and looked at again shortly; one that ended is dropped.
func (r *renewer) renew(due []*Lease) {
	start := r.c.cfg.clock.Now()
	// An attempt may take half a renewal period, so that a hung call fails
	// in time to record why and to retry; and never beyond the earliest
	// validity in the batch, past which its reply would be of no use.
	timeout := time.Duration(1<<63 - 1)
	reqs := make([]driver.ExtendRequest, 0, len(due))
	leases := due[:0]
	for _, l := range due {
		ttl, validUntil, ok := l.tryBeginCall()
		if !ok {
			r.requeue(l, true)
			continue
		}
		reqs = append(reqs, driver.ExtendRequest{Key: l.key, Token: l.token, TTL: ttl})
		leases = append(leases, l)
		timeout = min(timeout, renewEvery(ttl)/2, validUntil.Sub(start))
	}
	if len(reqs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, time.Millisecond))
	defer cancel()
	var results []driver.ExtendResult
	if b := r.c.caps.batch; b != nil && len(reqs) > 1 {
		results = b.ExtendBatch(ctx, reqs)
	} else {
		results = make([]driver.ExtendResult, len(reqs))
		for i, q := range reqs {
			results[i].Grant, results[i].Err = r.c.store.Extend(ctx, q.Key, q.Token, q.TTL)
		}
	}
	for i, l := range leases {
		err := l.settle(start, reqs[i].TTL, results[i].Grant, classify(results[i].Err))
		r.requeue(l, err != nil)
	}
}

// requeue puts l back in the queue, one period of its current TTL ahead, or
// sooner after a failure, unless it ended meanwhile (released or lost).
func (r *renewer) requeue(l *Lease, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.mu.Lock()
	ended, period := l.err != nil, renewEvery(l.curTTL)
	l.mu.Unlock()
	if ended || l.index >= 0 {
		return
	}
	wait := period
	if failed {
		wait = max(period/5, 5*time.Millisecond)
	}
	r.push(l, wait, period)
	r.schedule()
}

func isNotHeld(err error) bool { return errors.Is(err, ErrNotHeld) }

// leaseQueue is a min-heap of leases by next renewal time.
type leaseQueue []*Lease

func (q leaseQueue) Len() int           { return len(q) }
func (q leaseQueue) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q leaseQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = int32(i), int32(j)
}
func (q *leaseQueue) Push(x any) {
	l := x.(*Lease)
	l.index = int32(len(*q))
	*q = append(*q, l)
}
func (q *leaseQueue) Pop() any {
	old := *q
	l := old[len(old)-1]
	old[len(old)-1] = nil
	l.index = -1
	*q = old[:len(old)-1]
	return l
}
