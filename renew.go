package dlock

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"
)

// renewer is the one renewal loop of a Client. Leases wait in a queue ordered
// by their next renewal; a tick renews all that are due in one batch (one
// pipelined round trip when the store is a BatchExtender), then schedules
// the next tick for the earliest lease. Ticks run on a clock timer, one at a
// time: an idle client (or one whose leases come and go faster than they
// need renewing) has no goroutine and starts none per lease.
type renewer struct {
	c       *Client
	mu      sync.Mutex // may be taken before a lease's mutex, never after
	q       leaseQueue
	timer   Timer     // the scheduled tick, if any
	at      time.Time // when it fires
	gen     uint64    // identifies the scheduled tick; stale ticks do nothing
	ticking bool      // a tick is renewing; it schedules the next when done
}

func newRenewer(c *Client) *renewer {
	return &renewer{c: c}
}

// renewEvery is the renewal period of a lease of length ttl.
func renewEvery(ttl time.Duration) time.Duration { return ttl / 3 }

func (r *renewer) add(l *Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.next = l.clock.Now().Add(renewEvery(l.ttl))
	heap.Push(&r.q, l)
	r.schedule()
}

func (r *renewer) remove(l *Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.index >= 0 {
		// The scheduled tick stays: a lease taken soon after will most likely
		// not need an earlier one, so short-lived leases arm no timer at all.
		// A tick that finds nothing due costs one wake-up per period.
		heap.Remove(&r.q, l.index)
	}
}

// schedule makes sure a tick is due no later than the earliest lease's
// renewal. Called with r.mu held.
func (r *renewer) schedule() {
	if r.ticking || len(r.q) == 0 {
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

// tick renews every due lease, batch after batch, then schedules the next.
func (r *renewer) tick(gen uint64) {
	r.mu.Lock()
	if gen != r.gen || r.ticking {
		r.mu.Unlock()
		return
	}
	r.timer = nil
	r.ticking = true
	r.mu.Unlock()
	for {
		due := r.due()
		if len(due) == 0 {
			break
		}
		r.renew(due)
	}
	r.mu.Lock()
	r.ticking = false
	r.schedule()
	r.mu.Unlock()
}

// due pops the leases whose renewal falls within a tenth of their period,
// so that leases taken close together are renewed in one batch.
func (r *renewer) due() (due []*Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.c.cfg.clock.Now()
	for len(r.q) > 0 && r.q[0].next.Sub(now) <= renewEvery(r.q[0].ttl)/10 {
		due = append(due, heap.Pop(&r.q).(*Lease))
	}
	return due
}

func (r *renewer) renew(due []*Lease) {
	start := r.c.cfg.clock.Now()
	// An attempt may take half a renewal period: a hung call then fails in
	// time to record why and to retry before the validity runs out.
	timeout := time.Duration(1<<63 - 1)
	reqs := make([]ExtendRequest, len(due))
	for i, l := range due {
		reqs[i] = ExtendRequest{Key: l.key, Token: l.token, TTL: l.ttl}
		timeout = min(timeout, renewEvery(l.ttl)/2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var results []ExtendResult
	if b, ok := r.c.store.(BatchExtender); ok && len(reqs) > 1 {
		results = b.ExtendBatch(ctx, reqs)
	} else {
		results = make([]ExtendResult, len(reqs))
		for i, q := range reqs {
			results[i].Grant, results[i].Err = r.c.store.Extend(ctx, q.Key, q.Token, q.TTL)
		}
	}
	for i, l := range due {
		r.settle(l, start, results[i])
	}
}

// settle applies one renewal result and puts the lease back in the queue
// unless it ended meanwhile (released or lost).
func (r *renewer) settle(l *Lease, start time.Time, res ExtendResult) {
	retry := renewEvery(l.ttl)
	if err := classify(res.Err); err != nil {
		if isNotHeld(err) {
			l.lose(err)
			return
		}
		l.renewFailed(err)
		retry = max(retry/5, 5*time.Millisecond)
	} else {
		l.extended(start.Add(res.Grant.TTL - drift(l.ttl)))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.Err() != nil || l.index >= 0 {
		return
	}
	l.next = r.c.cfg.clock.Now().Add(retry)
	heap.Push(&r.q, l)
}

func isNotHeld(err error) bool { return errors.Is(err, ErrNotHeld) }

// leaseQueue is a min-heap of leases by next renewal time.
type leaseQueue []*Lease

func (q leaseQueue) Len() int           { return len(q) }
func (q leaseQueue) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q leaseQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *leaseQueue) Push(x any) {
	l := x.(*Lease)
	l.index = len(*q)
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
