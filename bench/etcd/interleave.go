package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

// runInterleaved runs the uncontended scenario sc for every library in one
// process, in alternating blocks (cmp.Interleave), each library on its own
// client, counted apart, opened and warmed up before the first block.
func runInterleaved(endpoint string, sc scenario, libs []string, dur time.Duration, round int) ([]row, error) {
	dir, err := os.MkdirTemp("", "dlockbench-etcd-marker-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	j := job{Job: cmp.Job{Goroutines: 1, Duration: dur, Dir: dir}, Endpoint: endpoint}
	ws := make([]*worker, len(libs))
	fns := make([]cmp.LockFn, len(libs))
	ctrs := make([]*counter, len(libs))
	for i, lib := range libs {
		ctrs[i] = &counter{}
		cli, err := newClient(endpoint, ctrs[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		defer cli.Close()
		lk, err := newLocker(lib, cli)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		defer lk.close()
		// The peer's session lives on the worker's context (its keepalives
		// stop when it ends), so it must outlast every block, as in
		// runProcess: not the set-up's bounded ctx.
		if fns[i], err = lk.worker(context.Background()); err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		if err := cmp.WarmUp(ctx, fns[i], 0); err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		jl := j
		jl.Lib = lib
		ws[i] = &worker{j: jl, cli: cli}
	}
	cmp.Interleave(len(libs), dur, round, func(i int, d time.Duration) {
		u0, s0 := ctrs[i].unary.Load(), ctrs[i].sends.Load()
		ws[i].res.Block(cmp.Cycle{Lock: fns[i], Key: lockKey, Critical: ws[i].critical}, d)
		ws[i].res.Unary += ctrs[i].unary.Load() - u0
		ws[i].res.Sends += ctrs[i].sends.Load() - s0
	})
	rows := make([]row, len(libs))
	for i, lib := range libs {
		rows[i] = row{sc: sc, lib: lib, res: &ws[i].res}
	}
	return rows, nil
}
