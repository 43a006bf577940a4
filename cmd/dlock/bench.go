package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"example.com/dlock"
)

func init() { subcommands = append(subcommands, newBenchCmd) }

// benchOpts are the flags of `dlock bench`.
type benchOpts struct {
	store      storeFlags
	duration   time.Duration
	goroutines int
	key        string
	asJSON     bool
}

func newBenchCmd() *cobra.Command {
	var o benchOpts
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure this library's lock throughput and latency against the selected store",
		Long: `bench runs two scenarios of dlock's own against the selected store (no peers:
for the comparison with redsync and redislock see bench/ in the repository):

  uncontended   one goroutine: lock + unlock on its own key
  one-key       --goroutines goroutines on one key: lock, increment a counter
                that only the lock protects, unlock

It prints successful critical sections per second, latency percentiles (lock
call to unlock returned) and fairness (smallest per-goroutine share over the
mean share).

--json prints one JSON document instead (docs/cli.md, "JSON output"), also
when a scenario failed (with its error), but not when the store could not
be reached before the first scenario.

Exit status: 0 success; 64 bad usage; 69 store unreachable (before or during
a scenario); 76 the protected counter does not equal the number of
successful critical sections (the lock let two holders in); 77 refused by
the store.

` + storeFlagsHelp,
		Example: `  dlock bench --store redis://127.0.0.1:6379 --duration 5s
  dlock bench --store redlock://n1:6379,n2:6379,n3:6379 --goroutines 20
  dlock bench --json --duration 1s | jq '.scenarios[] | {name, ops_per_sec}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd.Context(), cmd.OutOrStdout(), o) },
	}
	o.store.register(cmd)
	cmd.Flags().DurationVar(&o.duration, "duration", 3*time.Second, "length of each scenario")
	cmd.Flags().IntVar(&o.goroutines, "goroutines", 50, "goroutines of the one-key scenario")
	cmd.Flags().StringVar(&o.key, "key", "dlock-bench", "key (prefix) the scenarios lock")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	return cmd
}

// runBench runs both scenarios and prints one line each. It fails with
// ExitUnavailable if the store cannot be reached (before any line is
// printed) or fails during a scenario, and with ExitLost if a scenario's
// protected counter disagrees with its count of critical sections.
func runBench(ctx context.Context, w io.Writer, o benchOpts) (err error) {
	if o.duration <= 0 || o.goroutines < 1 {
		return exitWith(ExitUsage, errors.New("--duration and --goroutines must be positive"))
	}
	st, err := o.store.connect(ctx) // an unreachable store is exit 69, not "0 ops/s"
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := dlock.New(st.Store)
	if err != nil {
		return exitWith(ExitUsage, err)
	}
	rep := &benchReport{Target: st.Desc, DurationMs: o.duration.Milliseconds(), Scenarios: []benchScenarioJSON{}}
	if o.asJSON {
		out := w
		defer func() { rep.write(out, err) }()
		w = io.Discard
	}
	fmt.Fprintf(w, "dlock bench against %s, %v per scenario\n", st.Desc, o.duration)
	for _, sc := range []struct {
		name string
		g    int
		one  bool
	}{{"uncontended", 1, false}, {"one-key", o.goroutines, true}} {
		r, err := benchScenario(ctx, c, o.key, sc.g, sc.one, o.duration)
		if err != nil {
			return exitFor(fmt.Errorf("%s: %w", sc.name, err))
		}
		rep.add(sc.name, sc.g, r)
		fmt.Fprintf(w, "%-12s %3d goroutines  %8.0f ops/s  p50 %-9v p99 %-9v max %-9v fairness %.2f  counter %d/%d\n",
			sc.name, sc.g, r.perSec(), r.pct(0.5), r.pct(0.99), r.pct(1), r.fairness(), r.protected(), r.total())
		if r.protected() != r.total() {
			return exitWith(ExitLost, fmt.Errorf("%s: protected counter %d, but %d critical sections succeeded", sc.name, r.protected(), r.total()))
		}
	}
	return nil
}

type benchResult struct {
	wall    time.Duration
	lat     []time.Duration
	counts  []int64
	counter []int64 // per key: one shared, or one per goroutine
}

// benchScenario runs g goroutines for d, on one shared key or one key each.
func benchScenario(ctx context.Context, c *dlock.Client, key string, g int, one bool, d time.Duration) (*benchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	r := &benchResult{counts: make([]int64, g), counter: make([]int64, g)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, g)
	start := time.Now()
	for i := range g {
		k, ctr := key, &r.counter[0]
		if !one {
			k, ctr = key+":"+strconv.Itoa(i), &r.counter[i]
		}
		wg.Go(func() {
			var lat []time.Duration
			for ctx.Err() == nil {
				t0 := time.Now()
				l, err := c.Lock(ctx, k)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					break
				}
				*ctr++ // protected by the lock only: a broken lock shows here
				if err := l.Release(context.WithoutCancel(ctx)); err != nil {
					errs <- err
					break
				}
				lat = append(lat, time.Since(t0))
				r.counts[i]++
			}
			mu.Lock()
			r.lat = append(r.lat, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r.wall = time.Since(start)
	close(errs)
	slices.Sort(r.lat)
	return r, <-errs
}

func (r *benchResult) total() int64 {
	var n int64
	for _, c := range r.counts {
		n += c
	}
	return n
}

func (r *benchResult) protected() int64 {
	var n int64
	for _, c := range r.counter {
		n += c
	}
	return n
}

func (r *benchResult) perSec() float64 { return float64(r.total()) / r.wall.Seconds() }

func (r *benchResult) pct(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[int(q*float64(len(r.lat)-1))].Round(time.Microsecond)
}

func (r *benchResult) fairness() float64 {
	if r.total() == 0 {
		return 0
	}
	return float64(slices.Min(r.counts)) * float64(len(r.counts)) / float64(r.total())
}
