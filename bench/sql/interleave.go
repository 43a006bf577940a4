package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

// interleaveBlocks is how many blocks each library's share of an
// interleaved scenario is cut into.
const interleaveBlocks = 10

// runInterleaved runs the uncontended scenario for every library in one
// process, in short alternating blocks (dur/10 each, the order rotating
// from block to block), so that a change in the machine's load (other
// jobs on a shared machine) falls on every library alike instead of on
// whichever ran during it. Each library has its own client, pool and
// counter, opened and warmed before the first block.
func runInterleaved(c conf, libs []string, dur time.Duration, round int) ([]row, error) {
	if err := prepare(c, false); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.Goroutines = 1
	dir, err := os.MkdirTemp("", "dlockbench-sql-marker-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	lks := make([]locker, len(libs))
	ctrs := make([]*counter, len(libs))
	for i, lib := range libs {
		ctrs[i] = &counter{}
		lk, err := newLocker(ctx, lib, c, ctrs[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		defer lk.close()
		lks[i] = lk
		u, err := lk.lock(ctx, "warm-interleaved")
		if err != nil {
			return nil, fmt.Errorf("%s: warm-up: %w", lib, err)
		}
		if err := u(ctx); err != nil {
			return nil, fmt.Errorf("%s: warm-up: %w", lib, err)
		}
	}
	res := make([]*result, len(libs))
	for i := range res {
		res[i] = &result{}
	}
	block := dur / interleaveBlocks
	for b := range interleaveBlocks {
		for k := range libs {
			i := (k + b + round) % len(libs)
			runBlock(job{conf: c, Lib: libs[i], Duration: block, Dir: dir}, lks[i], ctrs[i], res[i])
		}
	}
	rows := make([]row, len(libs))
	for i, lib := range libs {
		res[i].PerWorker = []int64{res[i].Ops}
		rows[i] = row{db: c.DB, sc: scenarios[0], lib: lib, round: round, res: res[i]}
	}
	return rows, nil
}

// runBlock runs one goroutine of j on lk for j.Duration and adds what it
// measured to into. It checks the time between cycles and never cancels a
// call in flight: a lock cut short by a deadline can leave its row held
// (the statement applied, the caller gave up), which would stall the
// library's next block until the lease ends.
func runBlock(j job, lk locker, ctr *counter, into *result) {
	ctx := context.Background()
	trips0, stmts0, dials0 := ctr.trips.Load(), ctr.stmts.Load(), ctr.dials.Load()
	cpu0, t0 := cmp.CPUTime(), time.Now()
	w := &worker{j: j}
	for end := t0.Add(j.Duration); time.Now().Before(end); {
		c0 := time.Now()
		unlock, err := lk.lock(ctx, lockKey)
		if err != nil {
			w.res.Fail(err)
			break
		}
		if err := errors.Join(w.critical(ctx), unlock(ctx)); err != nil {
			w.res.Fail(err)
			break
		}
		w.res.Ops++
		w.res.Lat = append(w.res.Lat, int64(time.Since(c0)))
	}
	wall := time.Since(t0)
	w.res.Trips, w.res.Stmts, w.res.Dials = ctr.trips.Load()-trips0, ctr.stmts.Load()-stmts0, ctr.dials.Load()-dials0
	w.res.CPU = cmp.CPUTime() - cpu0
	into.merge(&w.res) // w.res.Wall is 0: merge keeps into's
	into.Wall += wall
}
