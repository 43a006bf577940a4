package main

import (
	"fmt"
	"io"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

// stats are a row's figures.
type stats struct {
	cmp.Summary
	rtPerCS  float64       // ZooKeeper requests per critical section
	cpuPerCS time.Duration // client CPU
}

func statsOf(r row) stats {
	res := r.res
	s := stats{Summary: res.Summarize()}
	if cs := max(r.cs, res.Ops); cs > 0 {
		s.rtPerCS = float64(r.packets-res.DataOps) / float64(cs)
	}
	if res.Ops > 0 {
		s.cpuPerCS = res.CPU / time.Duration(res.Ops)
	}
	return s
}

func report(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| scenario | library | ops/s | p50 | p99 | share min / mean | ZooKeeper requests per CS | client CPU per CS | checks |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		s := statsOf(r)
		checks := fmt.Sprintf("%d overlaps, %d failures", r.res.Overlaps, r.res.Failures)
		switch {
		case r.sc.Seed:
			checks = fmt.Sprintf("sold %d/100 in %s, stock left %d, oversold %v, %d overlaps, %d failures",
				r.res.Successes, cmp.MS(r.res.Wall), r.final, r.oversold, r.res.Overlaps, r.res.Failures)
		case r.sc.Wake:
			checks = fmt.Sprintf("%d wake-ups; p50/p99 are release → next waiter's grant", r.res.Ops)
		}
		if r.res.FirstErr != "" {
			checks += "; first error: " + r.res.FirstErr
		}
		cpu := fmt.Sprintf("%d µs", s.cpuPerCS.Microseconds())
		if r.sc.Wake {
			cpu = "-"
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %.0f / %.1f | %.2f | %s | %s |\n",
			r.sc.Name, r.lib, s.OpsPerSec, cmp.MS(s.P50), cmp.MS(s.P99), s.MinShare, s.Mean, s.rtPerCS, cpu, checks)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | dlock / zk.Lock | target (issue 15) | met |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for i := 0; i+1 < len(rows); i += 2 {
		ratioRow(w, rows[i], rows[i+1])
	}
}

// ratioRow compares dlock's row d with the peer's row p.
func ratioRow(w io.Writer, d, p row) {
	sd, sp := statsOf(d), statsOf(p)
	switch {
	case d.sc.Seed:
		speed := p.res.Wall.Seconds() / d.res.Wall.Seconds()
		fmt.Fprintf(w, "| %s | %.2fx faster (%s vs %s), %d%% success | 100%% success | %s |\n",
			d.sc.Name, speed, cmp.MS(d.res.Wall), cmp.MS(p.res.Wall), d.res.Successes, cmp.Yes(d.res.Successes == 100 && !d.oversold))
	case d.sc.Wake:
		fmt.Fprintf(w, "| %s | p50 %s vs %s, p99 %s vs %s | within a few ms (p99 ≤ 5 ms) | %s |\n",
			d.sc.Name, cmp.MS(sd.P50), cmp.MS(sp.P50), cmp.MS(sd.P99), cmp.MS(sp.P99), cmp.Yes(sd.P99 <= 5*time.Millisecond))
	case d.sc.Name == "uncontended":
		t := sd.OpsPerSec / sp.OpsPerSec
		fmt.Fprintf(w, "| %s | throughput %.2fx | ≥ 1.0x | %s |\n", d.sc.Name, t, cmp.Yes(t >= 1))
	default:
		t, l := sd.OpsPerSec/sp.OpsPerSec, float64(sd.P99)/float64(sp.P99)
		fmt.Fprintf(w, "| %s | throughput %.2fx, p99 %.2fx | throughput ≥ 2x, p99 ≤ 0.2x | %s |\n",
			d.sc.Name, t, l, cmp.Yes(t >= 2 && l <= 0.2))
	}
}
