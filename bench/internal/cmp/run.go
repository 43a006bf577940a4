// Package cmp is what the comparison benchmarks (bench/etcd, bench/zk,
// bench/sql) share: a run's tally, the timed loop of lock, critical section
// and unlock, the overlap marker, the child processes a scenario runs in,
// and the report's figures. Each program keeps its store's parts (clients,
// servers, libraries, request counting) and its own table.
package cmp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// LockFn takes the lock on key and returns its unlock.
type LockFn func(ctx context.Context, key string) (unlock func(context.Context) error, err error)

// Job is what one process of a timed or seed scenario runs, as the etcd
// and ZooKeeper comparisons share it; they embed it with their server's
// address, so its fields stand in their JSON.
type Job struct {
	Lib        string        `json:"lib"`
	Goroutines int           `json:"goroutines"`
	Duration   time.Duration `json:"duration"` // 0: one request per goroutine (seed)
	Dir        string        `json:"dir"`      // overlap marker's directory, shared by the processes
	Proc       int           `json:"proc"`
	Open       *Arrivals     `json:"open,omitempty"` // an open-loop run (OpenLoop) instead of the closed loop
}

// SeedLimit is the longest a seed scenario (Duration 0) may run.
const SeedLimit = 2 * time.Minute

// Start sets up j's goroutines' lock functions with worker (before the
// clock starts), warms up with the first (10 s at most), calls ready, waits
// for gate to close, and returns them with the run's context: it ends
// after j.Duration, or SeedLimit for a seed. On error nothing is returned
// to stop.
func (j Job) Start(worker func() (LockFn, error), ready func(), gate <-chan struct{}) ([]LockFn, context.Context, context.CancelFunc, error) {
	fns := make([]LockFn, j.Goroutines)
	for g := range fns {
		var err error
		if fns[g], err = worker(); err != nil {
			return nil, nil, nil, err
		}
	}
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := WarmUp(wctx, fns[0], j.Proc); err != nil {
		return nil, nil, nil, err
	}
	ready()
	<-gate
	limit := j.Duration
	if limit == 0 {
		limit = SeedLimit
	}
	ctx, stop := context.WithTimeout(context.Background(), limit)
	return fns, ctx, stop, nil
}

// Tally is what one worker, one process or (merged) a whole run measured.
// Programs embed it in their result, so its fields stand in their JSON.
type Tally struct {
	Ops       int64         `json:"ops"`       // critical sections completed
	Successes int64         `json:"successes"` // seed: units of stock sold
	Failures  int64         `json:"failures"`
	Overlaps  int64         `json:"overlaps"`
	FirstErr  string        `json:"first_err,omitempty"`
	Lat       []int64       `json:"lat_ns"`            // lock + critical section + unlock, per cycle
	Wait      []int64       `json:"wait_ns,omitempty"` // open loop: scheduled arrival to grant (OpenLoop)
	Late      int64         `json:"late,omitempty"`    // open loop: requests cut while still waiting
	PerWorker []int64       `json:"per_worker"`
	Wall      time.Duration `json:"wall"`
	CPU       time.Duration `json:"cpu"` // the client processes' user + system CPU time
}

// Merge adds o to t: counts and CPU add up, latencies and shares join, the
// wall time is the longer, and the first error stays the first.
func (t *Tally) Merge(o *Tally) {
	t.Ops += o.Ops
	t.Successes += o.Successes
	t.Failures += o.Failures
	t.Overlaps += o.Overlaps
	if t.FirstErr == "" {
		t.FirstErr = o.FirstErr
	}
	t.Lat = append(t.Lat, o.Lat...)
	t.Wait = append(t.Wait, o.Wait...)
	t.Late += o.Late
	t.PerWorker = append(t.PerWorker, o.PerWorker...)
	t.Wall = max(t.Wall, o.Wall)
	t.CPU += o.CPU
}

// Fail counts a failure and keeps the first error's text.
func (t *Tally) Fail(err error) {
	t.Failures++
	if t.FirstErr == "" {
		t.FirstErr = err.Error()
	}
}

// Enter enters the overlap marker in dir (a directory every process of a
// run shares: mkdir fails if another holder is inside), counting an
// overlap if it cannot, and returns the function that leaves it.
func (t *Tally) Enter(dir string) (leave func()) {
	marker := filepath.Join(dir, "inside")
	if err := os.Mkdir(marker, 0o700); err != nil {
		t.Overlaps++
		return func() {}
	}
	return func() { _ = os.Remove(marker) }
}

// Cycle is one worker's loop: Lock on Key, Critical, unlock, until the
// context ends, or one request if Once (the seed scenario).
type Cycle struct {
	Lock     LockFn
	Key      string
	Critical func(context.Context) error
	Once     bool
	// Cut, if set, sees every lock error before it counts (t0 is the
	// cycle's start); true excuses it.
	Cut func(ctx context.Context, t0 time.Time) bool
}

// Loop runs c on ctx into t. A lock error is a failure unless c.Cut excuses
// it or, in a timed run, the end cut it (Ending); a critical section or an
// unlock that fails is a failure; a whole cycle is an op and a latency.
func (t *Tally) Loop(ctx context.Context, c Cycle) {
	for ctx.Err() == nil {
		t0 := time.Now()
		unlock, err := c.Lock(ctx, c.Key)
		if err != nil {
			excused := c.Cut != nil && c.Cut(ctx, t0)
			if !excused && (c.Once || !Ending(ctx)) {
				t.Fail(err)
			}
			if c.Once {
				return
			}
			continue
		}
		cerr := c.Critical(context.WithoutCancel(ctx))
		uerr := unlock(context.WithoutCancel(ctx))
		if err := errors.Join(cerr, uerr); err != nil {
			t.Fail(err)
		} else {
			t.Ops++
			t.Lat = append(t.Lat, int64(time.Since(t0)))
		}
		if c.Once {
			return // seed: one request per goroutine
		}
	}
}

// Ending reports whether ctx has ended or ends within 100 ms: a call cut by
// the end of a timed run (the server may see the propagated deadline before
// the client's timer fires) is not a failure.
func Ending(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ctx.Err() != nil || (ok && time.Until(d) < 100*time.Millisecond)
}

// CPUTime is this process's user + system CPU time so far (0 if the system
// does not say).
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Base is t itself: through embedding, a program's result gives its Tally.
func (t *Tally) Base() *Tally { return t }

// Workers runs work(g) for g in [0, n) at once and merges each worker's
// result into total (merge, one at a time), adding the worker's ops as its
// share (PerWorker); total's Wall and CPU are the time the whole took.
func Workers[R interface{ Base() *Tally }](total R, n int, work func(g int) R, merge func(R)) {
	cpu0, t0 := CPUTime(), time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			r := work(g)
			mu.Lock()
			defer mu.Unlock()
			merge(r)
			total.Base().PerWorker = append(total.Base().PerWorker, r.Base().Ops)
		})
	}
	wg.Wait()
	total.Base().Wall, total.Base().CPU = time.Since(t0), CPUTime()-cpu0
}

// WarmUp takes and releases lock on "warm-<proc>", so that connections and
// sessions exist before the clock starts; its error says "warm-up".
func WarmUp(ctx context.Context, lock LockFn, proc int) error {
	unlock, err := lock(ctx, "warm-"+strconv.Itoa(proc))
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := unlock(ctx); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// Open is a gate that is already open: a run in this process starts at once.
var Open = func() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
