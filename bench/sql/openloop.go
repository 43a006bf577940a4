package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

// runOpen is -open: latency under offered load (cmp.OpenPlan) on each
// database of o. The peers' saturated throughput is the 2x25 scenario's;
// the open loop runs in 2 processes with 25 workers each (so at most as
// many requests in flight as in that scenario), for o.dur per turn, in
// o.rounds rounds.
func runOpen(out io.Writer, o options, open cmp.OpenFlags) error {
	fmt.Fprintf(out, "%s\ncommand: cd bench && go run ./sql %s; %v per turn\n\n", machine(), o.args, o.dur)
	seed := open.SeedOrClock()
	for _, db := range o.dbs {
		if err := openDB(out, db, o, seed); err != nil {
			return fmt.Errorf("%s: %w", db, err)
		}
	}
	return nil
}

func openDB(out io.Writer, db string, o options, seed uint64) error {
	srv, err := startServer(db, o)
	if err != nil {
		return err
	}
	defer srv.stop()
	c := conf{DB: db, URL: srv.url}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := setup(ctx, c); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	fmt.Fprintf(out, "### %s\n\n%s\n\nload average at the start: %s\n\n", srv.name, srv.version, cmp.LoadAvg())
	sat := scenarios[slices.IndexFunc(scenarios, func(sc scenario) bool { return sc.Name == "2x25" })]
	libs := libsOf[db]
	plan := cmp.OpenPlan{Dlock: libs[0], Peers: libs[1:], Fractions: []float64{0.5, 0.8},
		Rounds: o.rounds, Seed: seed, Procs: sat.Procs,
		Saturate: func(lib string) (float64, error) {
			r, err := runScenario(c, sat, lib, o, 0)
			if err != nil {
				return 0, err
			}
			return r.res.Summarize().OpsPerSec, nil
		},
		Run: func(lib string, a cmp.Arrivals) (*cmp.Tally, error) {
			dir, err := os.MkdirTemp("", "dlockbench-sql-marker-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			if err := prepare(c, false); err != nil {
				return nil, err
			}
			cj := c
			cj.Goroutines = sat.Goroutines
			res, err := runProcs(job{conf: cj, Lib: lib, Duration: o.dur, Dir: dir, Open: &a}, sat.Procs)
			if err != nil {
				return nil, err
			}
			return &res.Tally, nil
		}}
	_, err = plan.Play(out)
	fmt.Fprintf(out, "load average at the end: %s\n\n", cmp.LoadAvg())
	return err
}
