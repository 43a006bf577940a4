package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

// runInterleaved runs the uncontended scenario for every library in one
// process, in alternating blocks (cmp.Interleave). Each library has its
// own client, pool and counter, opened and warmed before the first block.
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
	ws := make([]*worker, len(libs))
	for i, lib := range libs {
		ws[i] = &worker{j: job{conf: c, Lib: lib, Dir: dir}}
	}
	cmp.Interleave(len(libs), dur, round, func(i int, d time.Duration) {
		ctr, res := ctrs[i], &ws[i].res
		trips0, stmts0, dials0 := ctr.trips.Load(), ctr.stmts.Load(), ctr.dials.Load()
		res.Block(cmp.Cycle{Lock: lks[i].lock, Key: lockKey, Critical: ws[i].critical}, d)
		res.Trips += ctr.trips.Load() - trips0
		res.Stmts += ctr.stmts.Load() - stmts0
		res.Dials += ctr.dials.Load() - dials0
	})
	rows := make([]row, len(libs))
	for i, lib := range libs {
		rows[i] = row{db: c.DB, sc: scenarios[0], lib: lib, round: round, res: &ws[i].res}
	}
	return rows, nil
}
