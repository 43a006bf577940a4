package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

// stats are a row's figures.
type stats struct {
	cmp.Summary
	rtPerCS  float64
	cpuPerCS time.Duration // client CPU
}

func statsOf(r row) stats {
	res := r.res
	s := stats{Summary: res.Summarize()}
	if res.Ops > 0 {
		s.rtPerCS = float64(res.Unary+res.Sends-res.DataOps) / float64(res.Ops)
		s.cpuPerCS = res.CPU / time.Duration(res.Ops)
	}
	return s
}

// report writes the rows, then each library's ratios to concurrency, for
// rows in groups of per (one group per scenario and round, as cmp.Play
// returns them).
func report(w io.Writer, rows []row, per int) {
	fmt.Fprintln(w, "| scenario | library | ops/s | p50 | p99 | share min / mean | etcd requests per CS | client CPU per CS | checks |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		s := statsOf(r)
		checks := fmt.Sprintf("%d overlaps, %d failures", r.res.Overlaps, r.res.Failures)
		if r.sc.Seed {
			checks = fmt.Sprintf("sold %d/100 in %s, stock left %d, oversold %v, %d overlaps, %d failures",
				r.res.Successes, cmp.MS(r.res.Wall), r.final, r.oversold, r.res.Overlaps, r.res.Failures)
		}
		if r.res.FirstErr != "" {
			checks += "; first error: " + r.res.FirstErr
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %.0f / %.1f | %.2f | %d µs | %s |\n",
			r.sc.Name, r.lib, s.OpsPerSec, cmp.MS(s.P50), cmp.MS(s.P99), s.MinShare, s.Mean, s.rtPerCS, s.cpuPerCS.Microseconds(), checks)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | library | ratio to concurrency | target (issue 14) | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for i := 0; i+per <= len(rows); i += per {
		group := rows[i : i+per]
		p := group[slices.IndexFunc(group, func(r row) bool { return r.lib == "concurrency" })]
		for _, d := range group {
			if d.lib != "concurrency" {
				ratio(w, d, p)
			}
		}
	}
}

// ratio writes d's row of ratios to the peer's row p.
func ratio(w io.Writer, d, p row) {
	sd, sp := statsOf(d), statsOf(p)
	name := d.sc.Name + " | " + d.lib
	switch {
	case d.sc.Seed:
		speed := p.res.Wall.Seconds() / d.res.Wall.Seconds()
		ok := speed >= 3 && d.res.Successes == 100
		fmt.Fprintf(w, "| %s | %.2fx faster (%s vs %s), %d%% success | ≥ 3x faster, 100%% success | %s |\n",
			name, speed, cmp.MS(d.res.Wall), cmp.MS(p.res.Wall), d.res.Successes, cmp.Yes(ok))
	case d.sc.Name == "uncontended":
		t := sd.OpsPerSec / sp.OpsPerSec
		fmt.Fprintf(w, "| %s | throughput %.2fx | ≥ 1.0x | %s |\n", name, t, cmp.Yes(t >= 1))
	default:
		t, l := sd.OpsPerSec/sp.OpsPerSec, float64(sd.P99)/float64(sp.P99)
		fair := sd.MinShare >= sd.Mean/2
		fmt.Fprintf(w, "| %s | throughput %.2fx, p99 %.2fx, min share %.0f of mean %.1f | throughput ≥ 2x, p99 ≤ 0.2x, min share ≥ mean/2 | %s |\n",
			name, t, l, sd.MinShare, sd.Mean, cmp.Yes(t >= 2 && l <= 0.2 && fair))
	}
}
