package lease

import (
	"context"
	"sync"
	"time"

	"example.com/dlock/driver"
)

// Renewable is a lease as the renewal loop sees it, provided by the
// primitive. Its methods may take the lease's own mutex: the Renewer's is
// taken before a lease's, never after.
type Renewable interface {
	// Slot returns the lease's place in the renewal queue, guarded by the
	// Renewer's mutex.
	Slot() *Slot
	// BeginRenewal marks a call that sets the lease's expiry as under way,
	// unless one already is or the lease ended (ok false). It returns the
	// request to send and the lease's current validity.
	BeginRenewal() (req driver.ExtendRequest, validUntil time.Time, ok bool)
	// SettleRenewal applies the outcome of req, sent at start, ends the
	// call, and reports whether it failed.
	SettleRenewal(start time.Time, req driver.ExtendRequest, res driver.ExtendResult) (failed bool)
	// Current returns the TTL renewal now asks for, and whether the lease
	// ended.
	Current() (ttl time.Duration, ended bool)
}

// Extender is the primitive's side of renewal.
type Extender interface {
	// ExtendMany extends every request, returning one result per request in
	// the same order: one round trip when the store batches, else one call
	// per request.
	ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult
}

// Slot is a lease's bookkeeping in a Renewer's queue. The zero value is not
// queued; set Index to -1 (NewSlot) before first use.
type Slot struct {
	index  int32         // place in the queue, -1 if not queued
	next   time.Time     // when the lease is next due
	period time.Duration // its renewal period when it was queued
}

// NewSlot returns a slot that is not queued.
func NewSlot() Slot { return Slot{index: -1} }

// Queued reports whether the slot is in a queue. Called with the Renewer's
// mutex held (from Renewable methods called by the Renewer) or when no
// Renewer can see the lease.
func (s *Slot) Queued() bool { return s.index >= 0 }

// Renewer is the one renewal loop of a client. Leases wait in a queue
// ordered by their next renewal; a tick renews all that are due in one batch
// (ExtendMany). Ticks run on a clock timer, and each schedules the next
// before it sends its batch: a batch that hangs holds up only its own leases
// (out of the queue until it settles, and bounded by their validity), while
// further ticks keep renewing the others on time. An idle client (or one
// whose leases come and go faster than they need renewing) has no goroutine
// and starts none per lease; a batch in flight occupies its timer's
// goroutine.
type Renewer[T Stopper] struct {
	clock Clock[T]
	ext   Extender
	mu    sync.Mutex // may be taken before a lease's mutex, never after
	q     queue
	timer T         // the scheduled tick, if armed
	armed bool      // a tick is scheduled
	at    time.Time // when it fires
	gen   uint64    // identifies the scheduled tick; stale ticks do nothing
}

// NewRenewer returns a Renewer on clock that renews through ext.
func NewRenewer[T Stopper](clock Clock[T], ext Extender) *Renewer[T] {
	return &Renewer[T]{clock: clock, ext: ext}
}

// Add queues l for renewal one period of ttl from now.
func (r *Renewer[T]) Add(l Renewable, ttl time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.push(l, Period(ttl), Period(ttl))
	r.schedule()
}

// push queues l for a renewal after wait; period is its renewal period.
// Called with r.mu held.
func (r *Renewer[T]) push(l Renewable, wait, period time.Duration) {
	s := l.Slot()
	s.next, s.period = r.clock.Now().Add(wait), period
	r.q.push(entry{s, l})
}

// Remove takes l out of the queue, if it is queued. A lease being renewed
// is out of the queue until its batch settles, and is not queued again once
// it ended.
func (r *Renewer[T]) Remove(l Renewable) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := l.Slot().index; i >= 0 {
		// The scheduled tick stays: a lease taken soon after will most likely
		// not need an earlier one, so short-lived leases arm no timer at all.
		// A tick that finds nothing due costs one wake-up per period.
		r.q.remove(int(i))
	}
}

// Retune moves a queued lease's next renewal to one period of ttl from now,
// after the lease's expiry was set to ttl outside the loop (Extend): a
// shorter TTL must be renewed sooner than the old period. A lease out of the
// queue is either not renewed automatically or being settled by a batch,
// which queues it with its current TTL.
func (r *Renewer[T]) Retune(l Renewable, ttl time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := l.Slot()
	if s.index < 0 {
		return
	}
	s.period = Period(ttl)
	s.next = r.clock.Now().Add(s.period)
	r.q.fix(int(s.index))
	r.schedule()
}

// schedule makes sure a tick is due no later than the earliest lease's
// renewal. Called with r.mu held.
func (r *Renewer[T]) schedule() {
	if len(r.q) == 0 {
		return
	}
	next := r.q[0].slot.next
	if r.armed {
		if !r.at.After(next) {
			return
		}
		r.timer.Stop()
	}
	r.gen++
	gen := r.gen
	r.at, r.armed = next, true
	r.timer = r.clock.AfterFunc(next.Sub(r.clock.Now()), func() { r.tick(gen) })
}

// tick takes every due lease out of the queue, schedules the next tick for
// the others, then renews the due ones in one batch.
func (r *Renewer[T]) tick(gen uint64) {
	r.mu.Lock()
	if gen != r.gen {
		r.mu.Unlock()
		return
	}
	r.armed = false
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
func (r *Renewer[T]) due() (due []Renewable) {
	now := r.clock.Now()
	for len(r.q) > 0 && r.q[0].slot.next.Sub(now) <= r.q[0].slot.period/10 {
		due = append(due, r.q.remove(0).l)
	}
	return due
}

// renew renews due in one batch. A lease with a call under way is left to
// it and looked at again shortly; one that ended is dropped.
func (r *Renewer[T]) renew(due []Renewable) {
	start := r.clock.Now()
	// An attempt may take half a renewal period, so that a hung call fails
	// in time to record why and to retry; and never beyond the earliest
	// validity in the batch, past which its reply would be of no use.
	timeout := time.Duration(1<<63 - 1)
	reqs := make([]driver.ExtendRequest, 0, len(due))
	leases := due[:0]
	for _, l := range due {
		req, validUntil, ok := l.BeginRenewal()
		if !ok {
			r.requeue(l, true)
			continue
		}
		reqs = append(reqs, req)
		leases = append(leases, l)
		timeout = min(timeout, Period(req.TTL)/2, validUntil.Sub(start))
	}
	if len(reqs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, time.Millisecond))
	defer cancel()
	results := r.ext.ExtendMany(ctx, reqs)
	for i, l := range leases {
		r.requeue(l, l.SettleRenewal(start, reqs[i], results[i]))
	}
}

// requeue puts l back in the queue, one period of its current TTL ahead, or
// sooner after a failure, unless it ended meanwhile (released or lost).
func (r *Renewer[T]) requeue(l Renewable, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ttl, ended := l.Current()
	if ended || l.Slot().index >= 0 {
		return
	}
	period := Period(ttl)
	wait := period
	if failed {
		wait = max(period/5, 5*time.Millisecond)
	}
	r.push(l, wait, period)
	r.schedule()
}

// entry is a queued lease and its slot (reached without a method call).
type entry struct {
	slot *Slot
	l    Renewable
}

// queue is a min-heap of leases by next renewal time. It is not a
// container/heap.Interface: boxing an entry in an interface value would cost
// an allocation per push.
type queue []entry

func (q queue) less(i, j int) bool { return q[i].slot.next.Before(q[j].slot.next) }

func (q queue) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].slot.index, q[j].slot.index = int32(i), int32(j)
}

func (q *queue) push(e entry) {
	e.slot.index = int32(len(*q))
	*q = append(*q, e)
	q.up(len(*q) - 1)
}

// remove takes out the entry at i and returns it.
func (q *queue) remove(i int) entry {
	n := len(*q) - 1
	if n != i {
		q.swap(i, n)
		if !q.down(i, n) {
			q.up(i)
		}
	}
	old := *q
	e := old[n]
	old[n] = entry{}
	e.slot.index = -1
	*q = old[:n]
	return e
}

// fix restores the order after the entry at i changed.
func (q queue) fix(i int) {
	if !q.down(i, len(q)) {
		q.up(i)
	}
}

func (q queue) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !q.less(j, i) {
			break
		}
		q.swap(i, j)
		j = i
	}
}

func (q queue) down(i0, n int) bool {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 {
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && q.less(j2, j1) {
			j = j2 // right child
		}
		if !q.less(j, i) {
			break
		}
		q.swap(i, j)
		i = j
	}
	return i > i0
}
