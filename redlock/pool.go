package redlock

import (
	"sync"
	"sync/atomic"
	"time"
)

// Sizing of a Store's worker pool.
const (
	// workerIdle is how long a worker waits for a task before it exits; it
	// exits after one to two such periods without any task (it checks once
	// per period, so the hot path only sets a flag). Restarting a worker
	// costs one goroutine start (about a microsecond), so a second keeps
	// restarts negligible for any caller that calls more than about once a
	// second, while a Store that is never closed (stores from New often are
	// not: their Close does not own the nodes) holds its idle goroutines for
	// at most two seconds after its last call.
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
// nodes are any dlock.Store), so the pool never queues a task: it goes to an
// idle worker, else to a new worker below the cap, else to a one-off
// goroutine. A slow node therefore holds only the goroutines running its own
// calls, never another node's call or another caller's.
//
// The pool grows to the most node calls in flight at once (stalled nodes
// pile calls up), up to the cap. Idle workers receive tasks in turn, so
// while calls keep coming the pool keeps that size; it shrinks once calls
// pause for the idle period.
type pool struct {
	tasks chan task     // unbuffered: a send succeeds only to an idle worker
	quit  chan struct{} // closed by close: idle workers exit
	idle  time.Duration // workerIdle; tests shorten it
	max   int           // cap on live workers

	mu      sync.Mutex
	workers int // live workers
	closed  bool

	started atomic.Int64 // goroutines started, workers and one-offs (tests)
}

func newPool(max int) *pool {
	return &pool{tasks: make(chan task), quit: make(chan struct{}), idle: workerIdle, max: max}
}

// do runs t on an idle worker, a new worker, or (at the cap, or after
// close) a one-off goroutine. It never waits for a goroutine to be free.
func (p *pool) do(t task) {
	select {
	case p.tasks <- t:
		return
	default:
	}
	p.mu.Lock()
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

// work runs t, then the tasks handed to it, until it stayed idle for a
// whole idle period or the pool closed.
func (p *pool) work(t task) {
	defer p.exit()
	t.run(t.arg)
	timer := time.NewTimer(p.idle)
	defer timer.Stop()
	busy := false // a task ran since the timer was last set
	for {
		select {
		case t := <-p.tasks:
			t.run(t.arg)
			busy = true
		case <-timer.C:
			if !busy {
				return
			}
			busy = false
			timer.Reset(p.idle)
		case <-p.quit:
			return
		}
	}
}

func (p *pool) exit() {
	p.mu.Lock()
	p.workers--
	p.mu.Unlock()
}

// close makes idle workers exit and stops starting new ones; a worker busy
// with a node call exits when that call returns. Tasks handed to the pool
// afterwards run on one-off goroutines. close may be called more than once.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		close(p.quit)
	}
}
