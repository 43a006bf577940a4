package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// stats are a row's figures.
type stats struct {
	opsPerSec      float64
	p50, p99       time.Duration
	minShare, mean float64
	rtPerCS        float64       // ZooKeeper requests per critical section
	cpuPerCS       time.Duration // client CPU
}

func statsOf(r row) stats {
	res := r.res
	var s stats
	if res.Wall > 0 {
		s.opsPerSec = float64(res.Ops) / res.Wall.Seconds()
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
	if cs := max(r.cs, res.Ops); cs > 0 {
		s.rtPerCS = float64(r.packets-res.DataOps) / float64(cs)
	}
	if res.Ops > 0 {
		s.cpuPerCS = res.CPU / time.Duration(res.Ops)
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func report(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| scenario | library | ops/s | p50 | p99 | share min / mean | ZooKeeper requests per CS | client CPU per CS | checks |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		s := statsOf(r)
		checks := fmt.Sprintf("%d overlaps, %d failures", r.res.Overlaps, r.res.Failures)
		switch {
		case r.sc.Seed:
			checks = fmt.Sprintf("sold %d/100 in %s, stock left %d, oversold %v, %d overlaps, %d failures",
				r.res.Successes, ms(r.res.Wall), r.final, r.oversold, r.res.Overlaps, r.res.Failures)
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
			r.sc.Name, r.lib, s.opsPerSec, ms(s.p50), ms(s.p99), s.minShare, s.mean, s.rtPerCS, cpu, checks)
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
			d.sc.Name, speed, ms(d.res.Wall), ms(p.res.Wall), d.res.Successes, yes(d.res.Successes == 100 && !d.oversold))
	case d.sc.Wake:
		fmt.Fprintf(w, "| %s | p50 %s vs %s, p99 %s vs %s | within a few ms (p99 ≤ 5 ms) | %s |\n",
			d.sc.Name, ms(sd.p50), ms(sp.p50), ms(sd.p99), ms(sp.p99), yes(sd.p99 <= 5*time.Millisecond))
	case d.sc.Name == "uncontended":
		t := sd.opsPerSec / sp.opsPerSec
		fmt.Fprintf(w, "| %s | throughput %.2fx | ≥ 1.0x | %s |\n", d.sc.Name, t, yes(t >= 1))
	default:
		t, l := sd.opsPerSec/sp.opsPerSec, float64(sd.p99)/float64(sp.p99)
		fmt.Fprintf(w, "| %s | throughput %.2fx, p99 %.2fx | throughput ≥ 2x, p99 ≤ 0.2x | %s |\n",
			d.sc.Name, t, l, yes(t >= 2 && l <= 0.2))
	}
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}
