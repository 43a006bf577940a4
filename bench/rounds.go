package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// Rounds. This machine's speed drifts by tens of percent over minutes
// (shared vCPUs), so one library measured a minute after another can win or
// lose by the drift alone. With -rounds N every scenario runs N times over,
// the libraries taking turns in each round (for a timed scenario, each turn
// lasts duration/N), and the ratios are taken round by round, between turns
// seconds apart, then summarised by their median.

// addRound folds o, the same scenario and library measured again, into r.
// Counts and histograms add up, so the table shows the whole run; Extra
// keeps the first round's values.
func (r *result) addRound(o *result) {
	r.RoundOps = append(r.RoundOps, o.opsPerSec())
	r.Successes += o.Successes
	r.Failures += o.Failures
	if r.FirstErr == "" {
		r.FirstErr = o.FirstErr
	}
	for i := range min(len(r.PerWorker), len(o.PerWorker)) {
		r.PerWorker[i] += o.PerWorker[i]
	}
	r.Lat.merge(o.Lat)
	r.Crit.merge(o.Crit)
	r.RoundTrips += o.RoundTrips
	r.Mallocs += o.Mallocs
	r.ServerCPU += o.ServerCPU
	r.Wall += o.Wall
	r.Final += o.Final
	r.Expected += o.Expected
}

// roundRatio is dlock's throughput over another library's, round by round.
type roundRatio struct {
	scenario, lib  string
	median, lo, hi float64
	rounds         int
}

// roundRatios compares dlock with every other library of each scenario
// measured in more than one round.
func roundRatios(rep *report) []roundRatio {
	var out []roundRatio
	for _, d := range rep.Results {
		if d.Lib != "dlock" || d.Skipped != "" || len(d.RoundOps) < 2 {
			continue
		}
		for _, o := range rep.Results {
			if o.Scenario != d.Scenario || o.Lib == "dlock" || o.Skipped != "" || len(o.RoundOps) != len(d.RoundOps) {
				continue
			}
			var rs []float64
			for i, v := range o.RoundOps {
				if v > 0 {
					rs = append(rs, d.RoundOps[i]/v)
				}
			}
			if len(rs) == 0 {
				continue
			}
			slices.Sort(rs)
			out = append(out, roundRatio{d.Scenario, o.Lib, median(rs), rs[0], rs[len(rs)-1], len(rs)})
		}
	}
	return out
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func printRoundRatios(w io.Writer, rep *report) {
	rs := roundRatios(rep)
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\ndlock's ops/s ÷ each library's, round by round (%d interleaved rounds): median (lowest–highest)\n", rs[0].rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tlibrary\tmedian\trange\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%.2f×\t%.2f–%.2f\t\n", r.scenario, r.lib, r.median, r.lo, r.hi)
	}
	_ = tw.Flush()
}
