package main

import (
	"context"
	"fmt"
	"strconv"

	"example.com/dlock"
	"example.com/dlock/bench/internal/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	childEnv = "DLOCKBENCH_ETCD_JOB"
	stockKey = "bench/stock"
	lockKey  = "k"
)

// job is what one process runs.
type job struct {
	cmp.Job
	Endpoint string `json:"endpoint"`
}

// result is what one process (or, merged, a whole run) measured.
type result struct {
	cmp.Tally
	Unary   int64 `json:"unary"`
	Sends   int64 `json:"sends"`
	DataOps int64 `json:"data_ops"` // the seed's stock reads and writes, not the lock's
}

func (r *result) merge(o *result) {
	r.Tally.Merge(&o.Tally)
	r.Unary += o.Unary
	r.Sends += o.Sends
	r.DataOps += o.DataOps
}

// runProcess runs j in this process: it sets up the client, the library and
// every goroutine's lock, warms up, calls ready, waits for gate, and runs.
func runProcess(j job, ready func(), gate <-chan struct{}) (*result, error) {
	ctr := &counter{}
	cli, err := newClient(j.Endpoint, ctr)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	lk, err := newLocker(j.Lib, cli)
	if err != nil {
		return nil, err
	}
	defer lk.close()
	fns, ctx, stop, err := j.Start(func() (cmp.LockFn, error) { return lk.worker(context.Background()) }, ready, gate)
	if err != nil {
		return nil, err
	}
	defer stop()
	res := &result{}
	u0, s0 := ctr.unary.Load(), ctr.sends.Load()
	if j.Open != nil {
		res.OpenLoop(j.Open.Schedule(j.Proc, j.Duration), j.Duration, fns, lockKey, j.Dir, nil)
		res.Unary, res.Sends = ctr.unary.Load()-u0, ctr.sends.Load()-s0
		return res, nil
	}
	rl, reads := lk.(readLocker)
	cmp.Workers(res, len(fns), func(g int) *result {
		w := &worker{j: j, cli: cli}
		lock := fns[g]
		if reads && j.Duration == 0 { // the seed
			lock = w.lockRead(rl)
		}
		w.res.Loop(ctx, cmp.Cycle{Lock: lock, Key: lockKey, Critical: w.critical, Once: j.Duration == 0})
		return &w.res
	}, res.merge)
	res.Unary, res.Sends = ctr.unary.Load()-u0, ctr.sends.Load()-s0
	return res, nil
}

// worker is one goroutine's state.
type worker struct {
	j   job
	cli *clientv3.Client
	res result
	// lease is the seed's lease taken by a readLocker (the stock read with
	// the grant), pending the stock its unlock commits; nil without.
	lease   *dlock.Lease
	pending *string
}

// lockRead is the seed's lock with a readLocker: the stock comes with the
// grant, and the unlock commits the stock the critical section left in
// w.pending (Lease.Commit: written with the release, only while held), or
// just releases. A request counts as a success once its commit is done.
func (w *worker) lockRead(rl readLocker) cmp.LockFn {
	return func(ctx context.Context, key string) (func(context.Context) error, error) {
		l, err := rl.lockRead(ctx, key, stockKey)
		if err != nil {
			return nil, err
		}
		w.lease, w.pending = l, nil
		return func(ctx context.Context) error {
			if w.pending == nil {
				return l.Release(ctx)
			}
			if err := l.Commit(ctx, *w.pending); err != nil {
				return err
			}
			w.res.Successes++
			return nil
		}, nil
	}
}

// critical is the protected work: enter the overlap marker (a directory
// every process shares: mkdir fails if another holder is inside) and, in
// the seed scenario, sell one unit of stock (read, then write stock-1;
// with a readLocker, the value read with the grant, and stock-1 left for
// the unlock to commit).
func (w *worker) critical(ctx context.Context) error {
	defer w.res.Enter(w.j.Dir)()
	if w.j.Duration != 0 {
		return nil
	}
	if w.lease != nil {
		v, found := w.lease.Value()
		if !found {
			return fmt.Errorf("no stock key")
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return err // sold out: not a success
		}
		s := strconv.Itoa(n - 1)
		w.pending = &s
		return nil
	}
	w.res.DataOps++
	resp, err := w.cli.Get(ctx, stockKey)
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 {
		return fmt.Errorf("no stock key")
	}
	n, err := strconv.Atoi(string(resp.Kvs[0].Value))
	if err != nil || n <= 0 {
		return err // sold out: not a success
	}
	w.res.DataOps++
	if _, err := w.cli.Put(ctx, stockKey, strconv.Itoa(n-1)); err != nil {
		return err
	}
	w.res.Successes++
	return nil
}

// runProcs runs j in procs child processes (this program again), started
// together once every one is ready, and merges their results.
func runProcs(j job, procs int) (*result, error) {
	total := &result{}
	err := cmp.RunProcs(childEnv, procs, func(i int) job { j.Proc = i; return j }, nil, total.merge)
	return total, err
}
