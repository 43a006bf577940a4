package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"example.com/dlock/bench/internal/cmp"
)

// runOpen is -open: latency under offered load (cmp.OpenPlan). The peer's
// saturated throughput is the 2x25 scenario's; the open loop runs in 2
// processes of 25 workers each (so at most as many requests in flight as
// in that scenario), for cfg.dur per turn, in cfg.rounds rounds.
func runOpen(out io.Writer, cfg config, o cmp.OpenFlags) error {
	srv := &server{Addr: cfg.server}
	if cfg.server == "" {
		var err error
		if srv, err = startZK(); err != nil {
			return err
		}
		defer srv.stop()
	}
	fmt.Fprintf(out, "%s\ncommand: cd bench && go run ./zk %s; %v per turn, after a %v untimed warm-up per library\n\n", describe(srv), cfg.args, cfg.dur, cfg.warmup)
	if err := warmUp(srv, cfg); err != nil {
		return err
	}
	sat := scenarios[slices.IndexFunc(scenarios, func(sc scenario) bool { return sc.Name == "2x25" })]
	plan := cmp.OpenPlan{Dlock: "dlock", Peers: []string{libNames[1]}, Fractions: []float64{0.5, 0.8},
		Rounds: cfg.rounds, Seed: o.SeedOrClock(), Procs: sat.Procs,
		Saturate: func(lib string) (float64, error) {
			r, err := runScenario(srv, sat, lib, cfg)
			if err != nil {
				return 0, err
			}
			return r.res.Summarize().OpsPerSec, nil
		},
		Run: func(lib string, a cmp.Arrivals) (*cmp.Tally, error) {
			dir, err := os.MkdirTemp("", "dlockbench-zk-marker-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			j := job{Job: cmp.Job{Lib: lib, Goroutines: sat.Goroutines, Duration: cfg.dur, Dir: dir, Open: &a}, Addr: srv.Addr}
			res, err := runProcs(j, sat.Procs, nil)
			if err != nil {
				return nil, err
			}
			return &res.Tally, nil
		}}
	_, err := plan.Play(out)
	return err
}
