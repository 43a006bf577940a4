package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

// stats are a row's figures.
type stats struct {
	cmp.Summary
	tripsPerCS float64
	stmtsPerCS float64
	cpuPerCS   time.Duration // client CPU
	soldPerSec float64       // seed
}

func statsOf(r row) stats {
	res := r.res
	s := stats{Summary: res.Summarize()}
	if res.Wall > 0 {
		s.soldPerSec = float64(res.Successes) / res.Wall.Seconds()
	}
	if res.Ops > 0 {
		s.tripsPerCS = float64(res.Trips) / float64(res.Ops)
		s.stmtsPerCS = float64(res.Stmts) / float64(res.Ops)
		s.cpuPerCS = res.CPU / time.Duration(res.Ops)
	}
	return s
}

// report writes db's table of rows and the ratio table.
func report(w io.Writer, db string, libs []string, rows []row) {
	fmt.Fprintln(w, "| scenario | library | round | ops/s | p50 | p99 | share min / mean | round trips / statements per CS | client CPU per CS | checks |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		s := statsOf(r)
		checks := fmt.Sprintf("%d overlaps, %d failures", r.res.Overlaps, r.res.Failures)
		ops, share, trips, cpu := fmt.Sprintf("%.0f", s.OpsPerSec), fmt.Sprintf("%.0f / %.1f", s.MinShare, s.Mean),
			fmt.Sprintf("%.2f / %.2f", s.tripsPerCS, s.stmtsPerCS), fmt.Sprintf("%d µs", s.cpuPerCS.Microseconds())
		switch {
		case r.sc.Seed:
			checks = fmt.Sprintf("sold %d/100 in %s (%d requests unfinished at the cap), stock left %d, oversold %v, %d overlaps, %d failures",
				r.res.Successes, cmp.MS(r.res.Wall), r.res.Unfinish, r.final, r.oversold, r.res.Overlaps, r.res.Failures)
			ops = fmt.Sprintf("%.1f sold/s", s.soldPerSec)
		case r.sc.Wakeup:
			ops, share, trips, cpu = fmt.Sprintf("%d samples", r.res.Ops), "—", "—", "—"
		}
		if !r.sc.Seed && r.res.Unfinish > 0 {
			checks += fmt.Sprintf(", %d waits open at the end (in p99 at their length then)", r.res.Unfinish)
		}
		if r.res.Dials > 0 {
			checks += fmt.Sprintf(", %d connections opened while timed", r.res.Dials)
		}
		if r.res.FirstErr != "" {
			checks += "; first error: " + r.res.FirstErr
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n",
			r.sc.Name, r.lib, r.round+1, ops, cmp.MS(s.P50), cmp.MS(s.P99), share, trips, cpu, checks)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | round | dlock ÷ peer | target (issue 16) | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for i := 0; i+len(libs) <= len(rows); i += len(libs) {
		group := rows[i : i+len(libs)]
		for _, d := range group {
			if !strings.HasPrefix(d.lib, "dlock") {
				continue
			}
			for _, p := range group {
				if isPeer(p.lib) {
					ratioRow(w, d, p)
				}
			}
		}
	}
	fmt.Fprintln(w)
}

// ratioRow writes dlock d against peer p with issue 16's target.
func ratioRow(w io.Writer, d, p row) {
	sd, sp := statsOf(d), statsOf(p)
	name := fmt.Sprintf("| %s | %d | ", d.sc.Name, d.round+1)
	if d.lib != "dlock" {
		name += d.lib + ": "
	}
	t, l := div(sd.OpsPerSec, sp.OpsPerSec), div(float64(sd.P99), float64(sp.P99))
	switch {
	case d.sc.Seed:
		speed := div(sd.soldPerSec, sp.soldPerSec)
		all := d.res.Successes == 100
		capped := ""
		if p.res.Successes < 100 {
			capped = fmt.Sprintf(" (%s sold %d/100 before the cap: a lower bound)", p.lib, p.res.Successes)
		}
		if strings.HasPrefix(p.lib, "pglock") {
			fmt.Fprintf(w, "%s%.1fx %s's sold/s%s, dlock sold %d/100 | ≥ 10x, 100 %% success | %s |\n", name, speed, p.lib, capped, d.res.Successes, cmp.Yes(speed >= 10 && all))
		} else {
			fmt.Fprintf(w, "%s%.1fx %s's sold/s%s, dlock sold %d/100 | 100 %% success (no ratio set) | %s |\n", name, speed, p.lib, capped, d.res.Successes, cmp.Yes(all))
		}
	case d.sc.Wakeup:
		fmt.Fprintf(w, "%sp50 %s vs %s's %s (%.3fx); p99 %s vs %s | dlock p50 ≤ 5 ms | %s |\n",
			name, cmp.MS(sd.P50), p.lib, cmp.MS(sp.P50), div(float64(sd.P50), float64(sp.P50)), cmp.MS(sd.P99), cmp.MS(sp.P99), cmp.Yes(sd.P50 <= 5*time.Millisecond && d.res.Ops > 0))
	case d.sc.Name == "uncontended" && strings.HasPrefix(p.lib, "pglock"):
		fmt.Fprintf(w, "%sthroughput %.2fx %s | ≥ 1.0x | %s |\n", name, t, p.lib, cmp.Yes(t >= 1))
	case d.sc.Name == "uncontended":
		fmt.Fprintf(w, "%sthroughput %.2fx %s | (no target) | — |\n", name, t, p.lib)
	case strings.HasPrefix(p.lib, "pglock"):
		fmt.Fprintf(w, "%sthroughput %.2fx, p99 %.3fx %s | throughput ≥ 5x, p99 ≤ 0.1x | %s |\n", name, t, l, p.lib, cmp.Yes(t >= 5 && l <= 0.1))
	default:
		fmt.Fprintf(w, "%sthroughput %.2fx, p99 %.3fx %s | throughput ≥ 2x | %s |\n", name, t, l, p.lib, cmp.Yes(t >= 2))
	}
}

func div(a, b float64) float64 {
	if b == 0 {
		return math.Inf(1)
	}
	return a / b
}

// isPeer reports whether lib is a peer (not dlock, a diagnostic or the
// negative control).
func isPeer(lib string) bool {
	return !strings.HasPrefix(lib, "dlock") && !strings.HasPrefix(lib, "store") && lib != "none"
}
