package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/bench/internal/cmp"
	"example.com/dlock/internal/redisserver"
)

// openPeers are the Redis peers whose best saturated throughput sets the
// open loop's rates.
var openPeers = []string{"redsync", "redsync-tuned", "redislock", "redislock-tuned"}

// runOpen is -open: latency under offered load (cmp.OpenPlan) on a Redis it
// starts. The work is onekey-2x25's (lock, read-modify-write of a counter,
// unlock; dlock reads with the grant and writes with the release), and the
// peers' saturated throughput is that scenario's; the open loop runs in its
// 2 processes with 25 workers each, for f.duration per turn, in f.rounds
// rounds. The counter must read back as the completed requests; a peer's
// request that gives up (redislock waits at most its TTL) is a failure.
func runOpen(out io.Writer, f flags, o cmp.OpenFlags) error {
	srv, err := redisserver.StartProcess("")
	if err != nil {
		return err
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	rep := newReport(f, rdb)
	fmt.Fprintf(out, "machine: %s, %d CPUs, %s; Redis %s; %v\ncommand: cd bench && go run . %s; %v per turn\n\n",
		rep.CPU, rep.NumCPU, runtime.Version(), rep.Redis, rep.Versions, strings.Join(os.Args[1:], " "), f.duration)
	sat := scenarios[slices.IndexFunc(scenarios, func(sc scenario) bool { return sc.Name == "onekey-2x25" })]
	check := func(r *result) error {
		if r.Final != r.Expected {
			return fmt.Errorf("counter %d, want %d (%d failures, first: %s)", r.Final, r.Expected, r.Failures, r.FirstErr)
		}
		return nil
	}
	plan := cmp.OpenPlan{Dlock: "dlock", Peers: openPeers, Fractions: []float64{0.5, 0.8},
		Rounds: f.rounds, Seed: o.SeedOrClock(), Procs: sat.Procs,
		Saturate: func(lib string) (float64, error) {
			r, err := runJob(rdb, job{Scenario: sat, Lib: lib, Addr: srv.Addr(), Duration: f.duration, Tuning: f.tuning})
			if err == nil {
				err = check(r)
			}
			if err != nil {
				return 0, err
			}
			return r.opsPerSec(), nil
		},
		Run: func(lib string, a cmp.Arrivals) (*cmp.Tally, error) {
			dir, err := os.MkdirTemp("", "dlockbench-redis-marker-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			r, err := runJob(rdb, job{Scenario: sat, Lib: lib, Addr: srv.Addr(), Duration: f.duration, Tuning: f.tuning, Open: &a, Dir: dir})
			if err == nil {
				err = check(r)
			}
			if err == nil && r.Open == nil {
				err = errors.New("no open-loop tally")
			}
			if err != nil {
				return nil, err
			}
			return r.Open, nil
		}}
	_, err = plan.Play(out)
	return err
}

// runOpenLocal is one process's share of an open-loop job: j.Open's
// arrivals (cmp.OpenLoop) on 25 workers, each request taking the lock
// (with WithRead where the library can), incrementing the counter (in the
// release's call with Lease.Commit, else with GET and SET) and unlocking.
func runOpenLocal(j job, rdb *redis.Client, lk locker, res *result) {
	var dataOps atomic.Int64
	var local int64
	fns := make([]cmp.LockFn, j.Scenario.Goroutines)
	for g := range fns {
		w := &worker{j: j, rdb: rdb, lk: lk, id: g, lat: newHist(), crit: newHist(), dataOps: &dataOps, local: &local}
		fns[g] = func(ctx context.Context, key string) (func(context.Context) error, error) {
			unlock, read, write, err := w.lock(ctx, key)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				_, cerr := w.critical(ctx, read, write)
				return errors.Join(cerr, unlock(ctx))
			}, nil
		}
	}
	t := &cmp.Tally{}
	t.OpenLoop(j.Open.Schedule(j.Proc, j.Duration), j.Duration, fns, "bench:lock", j.Dir, nil)
	res.Open, res.Successes, res.Failures, res.Wall = t, t.Ops, t.Failures, t.Wall
	if t.FirstErr != "" {
		res.FirstErr = t.FirstErr
	}
}
