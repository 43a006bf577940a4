package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// stats are a row's figures.
type stats struct {
	opsPerSec      float64
	p50, p99       time.Duration
	minShare, mean float64
	tripsPerCS     float64
	stmtsPerCS     float64
	cpuPerCS       time.Duration // client CPU
	soldPerSec     float64       // seed
}

func statsOf(r row) stats {
	res := r.res
	var s stats
	if res.Wall > 0 {
		s.opsPerSec = float64(res.Ops) / res.Wall.Seconds()
		s.soldPerSec = float64(res.Successes) / res.Wall.Seconds()
	}
	lat := slices.Clone(res.Lat)
	slices.Sort(lat)
	if len(lat) > 0 {
		s.p50 = time.Duration(lat[(len(lat)-1)*50/100])
		s.p99 = time.Duration(lat[(len(lat)-1)*99/100])
	}
	if len(res.PerWorker) > 0 {
		s.minShare = float64(slices.Min(res.PerWorker))
		var sum int64
		for _, v := range res.PerWorker {
			sum += v
		}
		s.mean = float64(sum) / float64(len(res.PerWorker))
	}
	if res.Ops > 0 {
		s.tripsPerCS = float64(res.Trips) / float64(res.Ops)
		s.stmtsPerCS = float64(res.Stmts) / float64(res.Ops)
		s.cpuPerCS = res.CPU / time.Duration(res.Ops)
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// report writes db's table of rows and the ratio table.
func report(w io.Writer, db string, libs []string, rows []row) {
	fmt.Fprintln(w, "| scenario | library | round | ops/s | p50 | p99 | share min / mean | round trips / statements per CS | client CPU per CS | checks |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		s := statsOf(r)
		checks := fmt.Sprintf("%d overlaps, %d failures", r.res.Overlaps, r.res.Failures)
		ops, share, trips, cpu := fmt.Sprintf("%.0f", s.opsPerSec), fmt.Sprintf("%.0f / %.1f", s.minShare, s.mean),
			fmt.Sprintf("%.2f / %.2f", s.tripsPerCS, s.stmtsPerCS), fmt.Sprintf("%d µs", s.cpuPerCS.Microseconds())
		switch {
		case r.sc.Seed:
			checks = fmt.Sprintf("sold %d/100 in %s (%d requests unfinished at the cap), stock left %d, oversold %v, %d overlaps, %d failures",
				r.res.Successes, ms(r.res.Wall), r.res.Unfinish, r.final, r.oversold, r.res.Overlaps, r.res.Failures)
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
			r.sc.Name, r.lib, r.round+1, ops, ms(s.p50), ms(s.p99), share, trips, cpu, checks)
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
	t, l := div(sd.opsPerSec, sp.opsPerSec), div(float64(sd.p99), float64(sp.p99))
	switch {
	case d.sc.Seed:
		speed := div(sd.soldPerSec, sp.soldPerSec)
		all := d.res.Successes == 100
		capped := ""
		if p.res.Successes < 100 {
			capped = fmt.Sprintf(" (%s sold %d/100 before the cap: a lower bound)", p.lib, p.res.Successes)
		}
		if strings.HasPrefix(p.lib, "pglock") {
			fmt.Fprintf(w, "%s%.1fx %s's sold/s%s, dlock sold %d/100 | ≥ 10x, 100 %% success | %s |\n", name, speed, p.lib, capped, d.res.Successes, yes(speed >= 10 && all))
		} else {
			fmt.Fprintf(w, "%s%.1fx %s's sold/s%s, dlock sold %d/100 | 100 %% success (no ratio set) | %s |\n", name, speed, p.lib, capped, d.res.Successes, yes(all))
		}
	case d.sc.Wakeup:
		fmt.Fprintf(w, "%sp50 %s vs %s's %s (%.3fx); p99 %s vs %s | dlock p50 ≤ 5 ms | %s |\n",
			name, ms(sd.p50), p.lib, ms(sp.p50), div(float64(sd.p50), float64(sp.p50)), ms(sd.p99), ms(sp.p99), yes(sd.p50 <= 5*time.Millisecond && d.res.Ops > 0))
	case d.sc.Name == "uncontended" && strings.HasPrefix(p.lib, "pglock"):
		fmt.Fprintf(w, "%sthroughput %.2fx %s | ≥ 1.0x | %s |\n", name, t, p.lib, yes(t >= 1))
	case d.sc.Name == "uncontended":
		fmt.Fprintf(w, "%sthroughput %.2fx %s | (no target) | — |\n", name, t, p.lib)
	case strings.HasPrefix(p.lib, "pglock"):
		fmt.Fprintf(w, "%sthroughput %.2fx, p99 %.3fx %s | throughput ≥ 5x, p99 ≤ 0.1x | %s |\n", name, t, l, p.lib, yes(t >= 5 && l <= 0.1))
	default:
		fmt.Fprintf(w, "%sthroughput %.2fx, p99 %.3fx %s | throughput ≥ 2x | %s |\n", name, t, l, p.lib, yes(t >= 2))
	}
}

func div(a, b float64) float64 {
	if b == 0 {
		return math.Inf(1)
	}
	return a / b
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// isPeer reports whether lib is a peer (not dlock, a diagnostic or the
// negative control).
func isPeer(lib string) bool {
	return !strings.HasPrefix(lib, "dlock") && !strings.HasPrefix(lib, "store") && lib != "none"
}
