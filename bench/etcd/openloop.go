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
// processes of 25 sessions each (so at most as many requests in flight as
// in that scenario), for f.Dur per turn, in f.Rounds rounds.
func runOpen(out io.Writer, bin string, f cmp.Flags, o cmp.OpenFlags, args string) error {
	srv, err := startEtcd(bin)
	if err != nil {
		return err
	}
	defer srv.stop()
	env, err := describe(srv.Endpoint, bin)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s\ncommand: cd bench && go run ./etcd %s; %v per turn\n\n", env, args, f.Dur)
	sat := scenarios[slices.IndexFunc(scenarios, func(sc scenario) bool { return sc.Name == "2x25" })]
	plan := cmp.OpenPlan{Dlock: "dlock", Peers: []string{"concurrency"}, Fractions: []float64{0.5, 0.8},
		Rounds: f.Rounds, Seed: o.SeedOrClock(), Procs: sat.Procs,
		Saturate: func(lib string) (float64, error) {
			r, err := runScenario(srv.Endpoint, sat, lib, f.Dur)
			if err != nil {
				return 0, err
			}
			return r.res.Summarize().OpsPerSec, nil
		},
		Run: func(lib string, a cmp.Arrivals) (*cmp.Tally, error) {
			dir, err := os.MkdirTemp("", "dlockbench-etcd-marker-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			j := job{Job: cmp.Job{Lib: lib, Goroutines: sat.Goroutines, Duration: f.Dur, Dir: dir, Open: &a}, Endpoint: srv.Endpoint}
			res, err := runProcs(j, sat.Procs)
			if err != nil {
				return nil, err
			}
			return &res.Tally, nil
		}}
	_, err = plan.Play(out)
	return err
}
