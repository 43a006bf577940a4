package redlock

import (
	"sync"
	"sync/atomic"
	"time"
)

// Sizing of a Store's worker pool.
const (
	// workerIdle is how long a worker may wait for a task: it exits after
	// one to two such periods without one (a reaper checks once per period,
	// so the hot path reads no clock). Restarting a worker costs one
	// goroutine start (about a microsecond), so a second keeps restarts
	// negligible for any caller that calls more than about once a second,
	// while a Store that is never closed (stores from New often are not:
	// their Close does not own the nodes) holds its idle goroutines for at
	// most two seconds after its last call.
	workerIdle = time.Second
	// workersPerNode caps a Store's workers at this many per node: up to 64
	// concurrent calls (callers, or late replies of slow nodes) run without
	// starting a goroutine. The cap only bounds the idle goroutines a burst
	// leaves behind for a while (a few KB of stack each); node calls beyond
	// it run on one-off goroutines, as every node call did before the pool.
	workersPerNode = 64
)

// task is one node call of a fan-out: run(arg) on some goroutine.
type task struct {
	run func(int)
	arg int
}

// pool runs the node calls of fan-outs on long-lived worker goroutines, so
// that in steady state a call starts no goroutine (a goroutine per node per
// call was a tenth of the client's CPU on loopback). Node calls block (the
// nodes are any driver.Mutex), so the pool never queues a task: it goes to an
// idle worker, else to a new worker below the cap, else to a one-off
// goroutine. A slow node therefore holds only the goroutines running its own
// calls, never another node's call or another caller's.
//
// Idle workers wait on a stack, each on a channel of its own: the most
// recently used one gets the next task, so a burst's surplus stays at the
// bottom and is reaped even while calls keep coming, and a waiting worker
// blocks in a plain receive (no select, no timer per wait).
type pool struct {
	idle time.Duration // workerIdle; tests shorten it
	max  int           // cap on live workers

	mu      sync.Mutex
	ready   []*worker // idle workers, most recently parked last
	workers int       // live worker goroutines, idle or busy
	epoch   int       // reaper ticks so far
	reaper  *time.Timer
	reaping bool // the reaper is due
	closed  bool

	started atomic.Int64 // goroutines started, workers and one-offs (tests)
}

// worker is an idle worker's place on the stack.
type worker struct {
	tasks chan task // buffered 1: handing a task over never blocks
	epoch int       // pool epoch when it parked
}

func newPool(max int) *pool { return &pool{idle: workerIdle, max: max} }

// do runs t on an idle worker, a new worker, or (at the cap, or after
// close) a one-off goroutine. It never waits for a goroutine to be free.
func (p *pool) do(t task) {
	p.mu.Lock()
	if n := len(p.ready); n > 0 {
		w := p.ready[n-1]
		p.ready[n-1] = nil
		p.ready = p.ready[:n-1]
		p.mu.Unlock()
		w.tasks <- t
		return
	}
	worker := !p.closed && p.workers < p.max
	if worker {
		p.workers++
	}
	p.mu.Unlock()
	p.started.Add(1)
	if worker {
		go p.work(t)
	} else {
		go t.run(t.arg)
	}
}

// work runs t, then the tasks handed to it while it waits on the stack,
// until the reaper or close ends its wait.
func (p *pool) work(t task) {
	defer p.exit()
	w := &worker{tasks: make(chan task, 1)}
	for ok := true; ok; t, ok = <-w.tasks {
		t.run(t.arg)
		if !p.park(w) {
			return
		}
	}
}

// park puts w on the stack and makes sure the reaper is due; it reports
// false, and w exits, once the pool is closed.
func (p *pool) park(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	w.epoch = p.epoch
	p.ready = append(p.ready, w)
	if !p.reaping {
		p.reaping = true
		if p.reaper == nil {
			p.reaper = time.AfterFunc(p.idle, p.reap)
		} else {
			p.reaper.Reset(p.idle)
		}
	}
	return true
}

// reap runs once per idle period while workers wait: it ends those that
// parked before the previous tick, i.e. waited at least a whole period.
// They are at the bottom of the stack (parked in epoch order).
func (p *pool) reap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.epoch++
	n := 0
	for n < len(p.ready) && p.ready[n].epoch < p.epoch-1 {
		close(p.ready[n].tasks)
		n++
	}
	left := copy(p.ready, p.ready[n:])
	clear(p.ready[left:])
	p.ready = p.ready[:left]
	if p.reaping = left > 0; p.reaping {
		p.reaper.Reset(p.idle)
	}
}

func (p *pool) exit() {
	p.mu.Lock()
	p.workers--
	p.mu.Unlock()
}

// close ends the idle workers and stops starting new ones; a worker busy
// with a node call exits when that call returns. Tasks handed to the pool
// afterwards run on one-off goroutines. close may be called more than once.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	if p.reaper != nil {
		p.reaper.Stop()
	}
	for _, w := range p.ready {
		close(w.tasks)
	}
	p.ready = nil
}
