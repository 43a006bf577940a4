package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

// runInterleaved runs the uncontended scenario sc for every library in one
// process, in alternating blocks (cmp.Interleave), each library on its own
// connection (its own session), set up and warmed up before the first
// block. The server's packets are read around each block (the other
// library's idle session pings, a few per 10 s, fall on whichever block
// runs then).
func runInterleaved(srv *server, sc scenario, dur time.Duration, round int) ([]row, error) {
	dir, err := os.MkdirTemp("", "dlockbench-zk-marker-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	j := job{Job: cmp.Job{Goroutines: 1, Duration: dur, Dir: dir}, Addr: srv.Addr}
	rows := make([]row, len(libNames))
	ws := make([]*worker, len(libNames))
	fns := make([]cmp.LockFn, len(libNames))
	for i, lib := range libNames {
		conn, err := dial(srv.Addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		defer conn.Close()
		lk, err := newLocker(lib, conn)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		defer lk.close()
		if fns[i], err = lk.worker(); err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		if err := cmp.WarmUp(ctx, fns[i], 0); err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		jl := j
		jl.Lib = lib
		ws[i] = &worker{j: jl, conn: conn}
		rows[i] = row{sc: sc, lib: lib, res: &ws[i].res}
	}
	var errs []error
	cmp.Interleave(len(libNames), dur, round, func(i int, d time.Duration) {
		p0, err0 := srv.packets()
		ws[i].res.Block(cmp.Cycle{Lock: fns[i], Key: lockKey, Critical: ws[i].critical}, d)
		p1, err1 := srv.packets()
		rows[i].packets += p1 - p0
		errs = append(errs, err0, err1)
	})
	return rows, errors.Join(errs...)
}
