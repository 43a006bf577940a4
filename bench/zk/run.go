package main

import (
	"context"
	"fmt"
	"strconv"

	"example.com/dlock/bench/internal/cmp"
	"github.com/go-zookeeper/zk"
)

const (
	childEnv = "DLOCKBENCH_ZK_JOB"
	stockKey = "/bench/stock"
	lockKey  = "k"
)

// job is what one process runs.
type job struct {
	cmp.Job
	Addr string `json:"addr"`
}

// result is what one process (or, merged, a whole run) measured.
type result struct {
	cmp.Tally
	DataOps int64 `json:"data_ops"` // the seed's stock reads and writes, not the lock's
}

func (r *result) merge(o *result) {
	r.Tally.Merge(&o.Tally)
	r.DataOps += o.DataOps
}

// runProcess runs j in this process: it sets up the client, the library and
// every goroutine's lock, warms up, calls ready, waits for gate, and runs.
func runProcess(j job, ready func(), gate <-chan struct{}) (*result, error) {
	conn, err := dial(j.Addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	lk, err := newLocker(j.Lib, conn)
	if err != nil {
		return nil, err
	}
	defer lk.close()
	fns, ctx, stop, err := j.Start(func() (cmp.LockFn, error) { return lk.worker() }, ready, gate)
	if err != nil {
		return nil, err
	}
	defer stop()
	res := &result{}
	if j.Open != nil {
		res.OpenLoop(j.Open.Schedule(j.Proc, j.Duration), j.Duration, fns, lockKey, j.Dir, nil)
		return res, nil
	}
	cmp.Workers(res, len(fns), func(g int) *result {
		w := &worker{j: j, conn: conn}
		w.res.Loop(ctx, cmp.Cycle{Lock: fns[g], Key: lockKey, Critical: w.critical, Once: j.Duration == 0})
		return &w.res
	}, res.merge)
	return res, nil
}

// worker is one goroutine's state.
type worker struct {
	j    job
	conn *zk.Conn
	res  result
}

// critical is the protected work: enter the overlap marker (a directory
// every process shares: mkdir fails if another holder is inside) and, in
// the seed scenario, sell one unit of stock (read, then write stock-1).
func (w *worker) critical(context.Context) error {
	defer w.res.Enter(w.j.Dir)()
	if w.j.Duration != 0 {
		return nil
	}
	w.res.DataOps++
	b, _, err := w.conn.Get(stockKey)
	if err != nil {
		return fmt.Errorf("read stock: %w", err)
	}
	n, err := strconv.Atoi(string(b))
	if err != nil || n <= 0 {
		return err // sold out: not a success
	}
	w.res.DataOps++
	// Unconditional (version -1): only the lock keeps this read-modify-write
	// from losing an update.
	if _, err := w.conn.Set(stockKey, []byte(strconv.Itoa(n-1)), -1); err != nil {
		return err
	}
	w.res.Successes++
	return nil
}

// runProcs runs j in procs child processes (this program again), started
// together once every one is ready (ready is called then, before they
// start), and merges their results.
func runProcs(j job, procs int, ready func()) (*result, error) {
	total := &result{}
	err := cmp.RunProcs(childEnv, procs, func(i int) job { j.Proc = i; return j }, ready, total.merge)
	return total, err
}
