// Command bench compares dlock with github.com/go-redsync/redsync/v4,
// github.com/bsm/redislock and a hand-written floor (SET NX PX + EVALSHA
// compare-and-delete) on a real redis-server it starts itself.
//
//	cd bench && go run .                 # every scenario, 5 s each
//	cd bench && go run . -quick          # smoke test, about half a minute
//	cd bench && go run . -scenarios onekey-50,seed-2x500 -libs dlock,redsync -duration 10s
//	cd bench && go run . -open -rounds 3 # latency under offered load (openloop.go)
//
// It prints a table, writes results.json and chart.svg, and exits 1 if any
// scenario's protected counter disagrees with its successful critical
// sections.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/schollz/progressbar/v3"

	"example.com/dlock/bench/internal/cmp"
	"example.com/dlock/internal/redisserver"
)

const childEnv = "DLOCKBENCH_JOB"

type flags struct {
	scenarios, libs string
	duration        time.Duration
	rounds          int
	quick           bool
	jsonOut, svgOut string
	wdLease, wdHold time.Duration
	wdLocks         int
	progress        bool
	tuning          tuning
}

func main() {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(child(spec))
	}
	var f flags
	flag.StringVar(&f.scenarios, "scenarios", "all", "comma-separated scenarios to run, or all: "+scenarioNames())
	flag.StringVar(&f.libs, "libs", "all", "comma-separated libraries, or all: "+strings.Join(libNames, ",")+" (also: "+strings.Join(extraLibs, ",")+")")
	flag.DurationVar(&f.duration, "duration", 5*time.Second, "length of each timed scenario")
	flag.IntVar(&f.rounds, "rounds", 1, "run every scenario this many times, the libraries taking turns, and report dlock's ratios round by round (rounds.go)")
	flag.BoolVar(&f.quick, "quick", false, "smoke test: 1 s scenarios, 3 s watchdog hold")
	flag.StringVar(&f.jsonOut, "json", "results.json", "write results as JSON here (empty: don't)")
	flag.StringVar(&f.svgOut, "svg", "chart.svg", "write an SVG chart here (empty: don't)")
	flag.DurationVar(&f.wdLease, "watchdog-lease", 6*time.Second, "watchdog: lease length (renewed every third of it)")
	flag.DurationVar(&f.wdHold, "watchdog-hold", 20*time.Second, "watchdog: how long to hold the locks")
	flag.IntVar(&f.wdLocks, "watchdog-locks", 10000, "watchdog: number of locks")
	flag.BoolVar(&f.progress, "progress", true, "show a progress bar on stderr")
	f.tuning = defaultTuning
	flag.DurationVar(&f.tuning.RedsyncMin, "redsync-tuned-min", f.tuning.RedsyncMin, "redsync-tuned: shortest retry delay")
	flag.DurationVar(&f.tuning.RedsyncMax, "redsync-tuned-max", f.tuning.RedsyncMax, "redsync-tuned: longest retry delay")
	flag.DurationVar(&f.tuning.RedislockMin, "redislock-tuned-min", f.tuning.RedislockMin, "redislock-tuned: shortest retry delay")
	flag.DurationVar(&f.tuning.RedislockMax, "redislock-tuned-max", f.tuning.RedislockMax, "redislock-tuned: longest retry delay")
	var open cmp.OpenFlags
	open.Register(flag.CommandLine)
	flag.Parse()
	if open.On {
		if err := runOpen(os.Stdout, f, open); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		return
	}
	if f.quick {
		f.duration, f.wdHold, f.wdLease = time.Second, 3*time.Second, 1500*time.Millisecond
	}
	rep, err := run(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	printTable(os.Stdout, rep)
	printRoundRatios(os.Stdout, rep)
	if f.jsonOut != "" {
		b, _ := json.Marshal(rep)
		if err := os.WriteFile(f.jsonOut, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}
	if f.svgOut != "" {
		if err := os.WriteFile(f.svgOut, []byte(renderSVG(rep)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}
	if bad := violations(rep); len(bad) > 0 {
		fmt.Fprintln(os.Stderr, "bench: CORRECTNESS VIOLATIONS:\n  "+strings.Join(bad, "\n  "))
		os.Exit(1)
	}
}

func scenarioNames() string {
	var n []string
	for _, s := range scenarios {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

// pick returns the names in list, or all; extra names are accepted but not
// part of all.
func pick(list string, all []string, extra ...string) ([]string, error) {
	if list == "all" {
		return all, nil
	}
	known := append(slices.Clip(all), extra...)
	var out []string
	for _, x := range strings.Split(list, ",") {
		if !slices.Contains(known, x) {
			return nil, fmt.Errorf("unknown name %q (known: %s)", x, strings.Join(known, ","))
		}
		out = append(out, x)
	}
	return out, nil
}

func run(f flags) (*report, error) {
	names, err := pick(f.scenarios, strings.Split(scenarioNames(), ","))
	if err != nil {
		return nil, err
	}
	libs, err := pick(f.libs, libNames, extraLibs...)
	if err != nil {
		return nil, err
	}
	srv, err := redisserver.StartProcess("")
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	rep := newReport(f, rdb)
	var bar *progressbar.ProgressBar
	if f.progress {
		turns := 0
		for _, sc := range scenarios {
			if slices.Contains(names, sc.Name) {
				turns += roundsOf(sc, f) * len(libs)
			}
		}
		bar = progressbar.NewOptions(turns, progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish())
	}
	for _, sc := range scenarios {
		if !slices.Contains(names, sc.Name) {
			continue
		}
		if sc.Kind == "watchdog" {
			sc.Requests = f.wdLocks
		}
		rs, err := runScenario(rdb, srv.Addr(), sc, libs, f, bar)
		if err != nil {
			return nil, err
		}
		rep.Results = append(rep.Results, rs...)
	}
	if bar != nil {
		_ = bar.Finish()
	}
	return rep, nil
}

// runScenario runs sc for each library, in f.rounds rounds (see rounds.go),
// and returns one result per library.
func runScenario(rdb *redis.Client, addr string, sc scenario, libs []string, f flags, bar *progressbar.ProgressBar) ([]*result, error) {
	n := roundsOf(sc, f)
	merged := map[string]*result{}
	for range n {
		for _, lib := range libs {
			if bar != nil {
				bar.Describe(fmt.Sprintf("%-15s %-16s", sc.Name, lib))
			}
			j := job{Scenario: sc, Lib: lib, Addr: addr, Duration: f.duration / time.Duration(n), Hold: f.wdHold, Lease: f.wdLease, Tuning: f.tuning}
			r, err := runJob(rdb, j)
			if err != nil {
				return nil, fmt.Errorf("%s/%s: %w", sc.Name, lib, err)
			}
			if m := merged[lib]; m != nil {
				m.addRound(r)
			} else {
				r.RoundOps = []float64{r.opsPerSec()}
				merged[lib] = r
			}
			if bar != nil {
				_ = bar.Add(1)
			}
		}
	}
	out := make([]*result, len(libs))
	for i, lib := range libs {
		out[i] = merged[lib]
	}
	return out, nil
}

// roundsOf is how many rounds sc runs: f.rounds, but the watchdog, long
// and compared with nothing, runs once.
func roundsOf(sc scenario, f flags) int {
	if sc.Kind == "watchdog" {
		return 1
	}
	return max(1, f.rounds)
}

// runJob prepares Redis, runs j in this process or in child processes, and
// reads back the protected counter.
func runJob(rdb *redis.Client, j job) (*result, error) {
	ctx := context.Background()
	sc := j.Scenario
	if j.Lib == "dlock-noread" && !sc.FoldRead {
		r := newResult(j)
		r.Skipped = "same as dlock here (no data access to fold)"
		return r, nil
	}
	if sc.Kind == "watchdog" && !strings.HasPrefix(j.Lib, "dlock") {
		r := newResult(j)
		r.Skipped = "no automatic renewal in this library"
		return r, nil
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	initial := int64(0)
	if sc.Kind == "seed" {
		initial = int64(sc.Procs * sc.Requests)
	}
	if err := rdb.Set(ctx, dataKey, initial, 0).Err(); err != nil {
		return nil, err
	}
	cpu0, err := serverCPU(ctx, rdb)
	if err != nil {
		return nil, err
	}
	var r *result
	if sc.Procs == 1 {
		start := make(chan struct{})
		close(start)
		r, err = runLocal(j, func() {}, start)
	} else {
		r, err = runChildren(j)
	}
	if err != nil {
		return nil, err
	}
	cpu1, err := serverCPU(ctx, rdb)
	if err != nil {
		return nil, err
	}
	r.ServerCPU = cpu1 - cpu0
	switch sc.Kind {
	case "rmw", "seed":
		v, err := rdb.Get(ctx, dataKey).Int64()
		if err != nil {
			return nil, err
		}
		r.Final = v
		r.Expected = r.Successes
		if sc.Kind == "seed" {
			r.Expected = initial - r.Successes
		}
	}
	return r, nil
}

// runChildren re-executes this binary once per process, starts them
// together once all are set up, and merges their results (cmp.RunProcs).
func runChildren(j job) (*result, error) {
	total := newResult(j)
	if err := cmp.RunProcs(childEnv, j.Scenario.Procs, func(i int) job { j.Proc = i; return j }, nil, total.merge); err != nil {
		return nil, err
	}
	return total, nil
}

// child runs one process's share of a job given as JSON (cmp.Child).
func child(spec string) int { return cmp.Child(spec, runLocal) }
