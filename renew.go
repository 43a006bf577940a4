package dlock

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"
)

// renewer is the one renewal loop of a Client. Leases wait in a queue ordered
// by their next renewal; the loop renews all that are due in one batch (one
// pipelined round trip when the store is a BatchExtender). The loop's
// goroutine exits when the queue is empty and restarts with the next lease.
type renewer struct {
	c       *Client
	mu      sync.Mutex // may be taken before a lease's mutex, never after
	q       leaseQueue
	running bool
	wake    chan struct{}
}

func newRenewer(c *Client) *renewer {
	return &renewer{c: c, wake: make(chan struct{}, 1)}
}

// renewEvery is the renewal period of a lease of length ttl.
func renewEvery(ttl time.Duration) time.Duration { return ttl / 3 }

func (r *renewer) add(l *Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.next = l.clock.Now().Add(renewEvery(l.ttl))
	heap.Push(&r.q, l)
	if !r.running {
		r.running = true
		go r.loop()
	} else if l.index == 0 {
		r.signal()
	}
}

func (r *renewer) remove(l *Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.index >= 0 {
		heap.Remove(&r.q, l.index)
		if len(r.q) == 0 {
			r.signal() // let the loop see the empty queue and exit
		}
	}
}

func (r *renewer) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *renewer) loop() {
	for {
		due, wait, ok := r.due()
		if !ok {
			return
		}
		if len(due) == 0 {
			sleep(context.Background(), r.c.cfg.clock, wait, r.wake)
			continue
		}
		r.renew(due)
	}
}

// due pops the leases whose renewal falls within a tenth of their period,
// so that leases taken close together are renewed in one batch. It returns
// ok=false, and marks the loop stopped, when no lease is left.
func (r *renewer) due() (due []*Lease, wait time.Duration, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.q) == 0 {
		r.running = false
		return nil, 0, false
	}
	now := r.c.cfg.clock.Now()
	for len(r.q) > 0 && r.q[0].next.Sub(now) <= renewEvery(r.q[0].ttl)/10 {
		due = append(due, heap.Pop(&r.q).(*Lease))
	}
	if len(due) == 0 {
		wait = r.q[0].next.Sub(now)
	}
	return due, wait, true
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
