package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/bench/internal/cmp"
)

// scenario is one workload of the comparison.
type scenario struct {
	Name       string `json:"name"`
	Procs      int    `json:"procs"`      // OS processes
	Goroutines int    `json:"goroutines"` // per process
	Kind       string `json:"kind"`       // cycle | rmw | seed | watchdog
	Requests   int    `json:"requests"`   // seed: per process (one per goroutine)
	PoolSize   int    `json:"pool_size"`  // 0: go-redis default
	FoldRead   bool   `json:"fold_read"`  // libraries that can read the data with the grant and write it with the release do (dlock: WithRead, Lease.Commit)
	Doc        string `json:"doc"`
}

var scenarios = []scenario{
	{Name: "uncontended-1", Procs: 1, Goroutines: 1, Kind: "cycle", Doc: "lock+unlock, 1 goroutine"},
	{Name: "uncontended-16", Procs: 1, Goroutines: 16, Kind: "cycle", Doc: "lock+unlock, 16 goroutines, distinct keys"},
	{Name: "onekey-50", FoldRead: true, Procs: 1, Goroutines: 50, Kind: "rmw", Doc: "one key, 50 goroutines: lock→GET→SET→unlock"},
	{Name: "onekey-2x25", FoldRead: true, Procs: 2, Goroutines: 25, Kind: "rmw", Doc: "one key, 2 processes × 25 goroutines"},
	{Name: "seed-2x50", FoldRead: true, Procs: 2, Goroutines: 50, Requests: 50, Kind: "seed", Doc: "stock 100, 2 processes × 50 concurrent requests"},
	{Name: "seed-2x500", FoldRead: true, Procs: 2, Goroutines: 500, Requests: 500, Kind: "seed", Doc: "stock 1000, 2 processes × 500 concurrent requests"},
	{Name: "stampede-1000", Procs: 1, Goroutines: 1000, PoolSize: 20, Kind: "rmw", Doc: "1000 waiters on one key, 20-connection pool"},
	{Name: "watchdog-10000", Procs: 1, Goroutines: 16, Requests: 10000, Kind: "watchdog", Doc: "10 000 locks held with automatic renewal"},
}

// job is what one process runs: a scenario for one library.
type job struct {
	Scenario scenario      `json:"scenario"`
	Lib      string        `json:"lib"`
	Addr     string        `json:"addr"`
	Duration time.Duration `json:"duration"`
	Hold     time.Duration `json:"hold"`  // watchdog: how long to hold
	Lease    time.Duration `json:"lease"` // watchdog: lease length
	Tuning   tuning        `json:"tuning"`
	Open     *cmp.Arrivals `json:"open,omitempty"` // an open-loop run (openloop.go) instead of the closed loop
	Dir      string        `json:"dir,omitempty"`  // open loop: the overlap marker's directory, shared by the processes
	Proc     int           `json:"proc,omitempty"` // the process's index in a run of several
}

// result is the outcome of a job in one process, merged over processes.
type result struct {
	Lib        string             `json:"lib"`
	Scenario   string             `json:"scenario"`
	Successes  int64              `json:"successes"`
	Failures   int64              `json:"failures"`
	FirstErr   string             `json:"first_error,omitempty"`
	PerWorker  []int64            `json:"per_worker"`
	Lat        *hist              `json:"latency"`
	Crit       *hist              `json:"critical_section"`
	RoundTrips int64              `json:"round_trips"` // lock traffic only
	Mallocs    uint64             `json:"mallocs"`
	ServerCPU  time.Duration      `json:"server_cpu_ns"` // redis-server's user+sys CPU over the job, all traffic included
	Wall       time.Duration      `json:"wall_ns"`
	Final      int64              `json:"final"`    // counter or stock after the run
	Expected   int64              `json:"expected"` // what Final must be
	Extra      map[string]float64 `json:"extra,omitempty"`
	Skipped    string             `json:"skipped,omitempty"`
	RoundOps   []float64          `json:"round_ops,omitempty"` // ops/s of each round (see rounds.go)
	Open       *cmp.Tally         `json:"open,omitempty"`      // an open-loop run's tally (openloop.go)
}

func newResult(j job) *result {
	return &result{Lib: j.Lib, Scenario: j.Scenario.Name, Lat: newHist(), Crit: newHist(), Extra: map[string]float64{}}
}

func (r *result) merge(o *result) {
	r.Successes += o.Successes
	r.Failures += o.Failures
	if r.FirstErr == "" {
		r.FirstErr = o.FirstErr
	}
	r.PerWorker = append(r.PerWorker, o.PerWorker...)
	r.Lat.merge(o.Lat)
	r.Crit.merge(o.Crit)
	r.RoundTrips += o.RoundTrips
	r.Mallocs += o.Mallocs
	r.Wall = max(r.Wall, o.Wall)
	for k, v := range o.Extra {
		r.Extra[k] += v
	}
	if o.Open != nil {
		if r.Open == nil {
			r.Open = &cmp.Tally{}
		}
		r.Open.Merge(o.Open)
	}
}

// counter counts round trips through a go-redis client: every command or
// pipeline sent is one.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

const dataKey = "bench:counter"

// runLocal runs this process's share of job j; ready is called once set up,
// and the run starts when start is closed.
func runLocal(j job, ready func(), start <-chan struct{}) (*result, error) {
	opts := &redis.Options{Addr: j.Addr}
	if j.Scenario.PoolSize > 0 {
		opts.PoolSize = j.Scenario.PoolSize
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	rt := &counter{}
	rdb.AddHook(rt)
	lk, err := newLocker(j.Lib, rdb, j.Tuning)
	if err != nil {
		return nil, err
	}
	defer lk.close()
	if err := warm(lk); err != nil {
		return nil, err
	}
	res := newResult(j)
	if j.Scenario.Kind == "watchdog" {
		ready()
		<-start
		return res, runWatchdog(j, rdb, rt, res)
	}
	var base *hist
	if j.Scenario.Name == "stampede-1000" {
		// The holder's critical section without waiters, same pool.
		one := j
		one.Scenario.Goroutines = 1
		one.Duration = max(j.Duration/5, 200*time.Millisecond)
		r1 := newResult(one)
		runWorkers(one, rdb, lk, &counter{}, r1, nil)
		base = r1.Crit
		if err := rdb.Set(context.Background(), dataKey, 0, 0).Err(); err != nil {
			return nil, err // the measured run starts from zero again
		}
	}
	ready()
	<-start
	if j.Open != nil {
		runOpenLocal(j, rdb, lk, res)
		return res, nil
	}
	runWorkers(j, rdb, lk, rt, res, nil)
	if base != nil {
		res.Extra["crit_p99_uncontended_ns"] = float64(base.quantile(0.99))
	}
	return res, nil
}

// warm makes the libraries load their scripts before measuring.
func warm(lk locker) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 3 {
		unlock, err := lk.lock(ctx, "bench:warm:"+strconv.Itoa(i))
		if err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		if err := unlock(ctx); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	return nil
}

// runWorkers runs the goroutines of one process and fills res.
func runWorkers(j job, rdb *redis.Client, lk locker, rt *counter, res *result, _ any) {
	sc := j.Scenario
	runCtx, cancel := context.WithTimeout(context.Background(), j.Duration)
	if sc.Kind == "seed" {
		runCtx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	}
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var dataOps atomic.Int64
	gate := make(chan struct{})
	var ms0, ms1 runtime.MemStats
	local := make([]int64, sc.Goroutines) // per-key counters for distinct keys
	for g := range sc.Goroutines {
		wg.Go(func() {
			w := &worker{j: j, rdb: rdb, lk: lk, id: g, lat: newHist(), crit: newHist(), dataOps: &dataOps, local: &local[g]}
			<-gate
			w.loop(runCtx)
			mu.Lock()
			defer mu.Unlock()
			res.Successes += w.ok
			res.Failures += w.failed
			if res.FirstErr == "" && w.firstErr != nil {
				res.FirstErr = w.firstErr.Error()
			}
			res.PerWorker = append(res.PerWorker, w.ok)
			res.Lat.merge(w.lat)
			res.Crit.merge(w.crit)
		})
	}
	runtime.ReadMemStats(&ms0)
	rt0 := rt.n.Load()
	t0 := time.Now()
	close(gate)
	wg.Wait()
	res.Wall = time.Since(t0)
	res.RoundTrips = rt.n.Load() - rt0 - dataOps.Load()
	runtime.ReadMemStats(&ms1)
	res.Mallocs = ms1.Mallocs - ms0.Mallocs
	if sc.Kind == "cycle" {
		var sum int64
		for _, v := range local {
			sum += v
		}
		res.Final, res.Expected = sum, res.Successes
	}
}

type worker struct {
	j        job
	rdb      *redis.Client
	lk       locker
	id       int
	lat      *hist
	crit     *hist
	dataOps  *atomic.Int64
	local    *int64
	ok       int64
	failed   int64
	firstErr error
}

func (w *worker) loop(ctx context.Context) {
	sc := w.j.Scenario
	key := "bench:lock"
	if sc.Kind == "cycle" {
		key = "bench:lock:" + strconv.Itoa(w.id)
	}
	n := 0
	for ctx.Err() == nil {
		if sc.Kind == "seed" && n == 1 {
			return // one request per goroutine
		}
		n++
		t0 := time.Now()
		unlock, read, write, err := w.lock(ctx, key)
		if err != nil {
			if sc.Kind == "seed" || ctx.Err() == nil {
				w.fail(err)
			}
			continue
		}
		t1 := time.Now()
		done, cerr := w.critical(ctx, read, write)
		w.crit.add(time.Since(t1))
		uerr := unlock(context.WithoutCancel(ctx))
		if err := errors.Join(cerr, uerr); err != nil {
			w.fail(err)
			continue
		}
		w.lat.add(time.Since(t0))
		if done {
			w.ok++
		}
	}
}

func (w *worker) fail(err error) {
	w.failed++
	if w.firstErr == nil {
		w.firstErr = err
	}
}

// lock takes the lock; in scenarios that fold the data access, a library
// that can read the data with the grant and write it with the release does:
// read returns the value read with the grant, write keeps the value for
// unlock to commit.
func (w *worker) lock(ctx context.Context, key string) (unlock func(context.Context) error, read func(context.Context) (int64, error), write func(context.Context, int64) error, err error) {
	if rl, ok := w.lk.(readLocker); ok && w.j.Scenario.FoldRead {
		h, err := rl.lockRead(ctx, key, dataKey)
		var pending *string
		return func(ctx context.Context) error {
				if pending != nil {
					return h.commit(ctx, *pending)
				}
				return h.release(ctx)
			}, func(context.Context) (int64, error) {
				if !h.found {
					return 0, redis.Nil
				}
				return strconv.ParseInt(h.value, 10, 64)
			}, func(_ context.Context, v int64) error {
				s := strconv.FormatInt(v, 10)
				pending = &s
				return nil
			}, err
	}
	unlock, err = w.lk.lock(ctx, key)
	return unlock, func(ctx context.Context) (int64, error) {
			w.dataOps.Add(1)
			return w.rdb.Get(ctx, dataKey).Int64()
		}, func(ctx context.Context, v int64) error {
			w.dataOps.Add(1)
			return w.rdb.Set(ctx, dataKey, v, 0).Err()
		}, err
}

// critical is the protected work, reading the data with read and writing it
// with write. It reports whether it counted as a success (a seed request
// finding no stock does not).
func (w *worker) critical(ctx context.Context, read func(context.Context) (int64, error), write func(context.Context, int64) error) (bool, error) {
	ctx = context.WithoutCancel(ctx) // finish a started critical section
	switch w.j.Scenario.Kind {
	case "cycle":
		*w.local++ // each goroutine has its own key and counter
		return true, nil
	case "rmw":
		v, err := read(ctx)
		if err != nil && !errors.Is(err, redis.Nil) {
			return false, err
		}
		return true, write(ctx, v+1)
	case "seed":
		v, err := read(ctx)
		if err != nil || v <= 0 {
			return false, err
		}
		return true, write(ctx, v-1)
	}
	return false, fmt.Errorf("unknown kind %q", w.j.Scenario.Kind)
}
