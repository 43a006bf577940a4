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
	rtPerCS        float64
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
	if res.Ops > 0 {
		s.rtPerCS = float64(res.Unary+res.Sends-res.DataOps) / float64(res.Ops)
		s.cpuPerCS = res.CPU / time.Duration(res.Ops)
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func report(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| scenario | library | ops/s | p50 | p99 | share min / mean | etcd requests per CS | client CPU per CS | checks |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		s := statsOf(r)
		checks := fmt.Sprintf("%d overlaps, %d failures", r.res.Overlaps, r.res.Failures)
		if r.sc.Seed {
			checks = fmt.Sprintf("sold %d/100 in %s, stock left %d, oversold %v, %d overlaps, %d failures",
				r.res.Successes, ms(r.res.Wall), r.final, r.oversold, r.res.Overlaps, r.res.Failures)
		}
		if r.res.FirstErr != "" {
			checks += "; first error: " + r.res.FirstErr
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %.0f / %.1f | %.2f | %d µs | %s |\n",
			r.sc.Name, r.lib, s.opsPerSec, ms(s.p50), ms(s.p99), s.minShare, s.mean, s.rtPerCS, s.cpuPerCS.Microseconds(), checks)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | dlock / concurrency | target (issue 14) | met |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for i := 0; i+1 < len(rows); i += 2 {
		d, p := rows[i], rows[i+1]
		sd, sp := statsOf(d), statsOf(p)
		switch {
		case d.sc.Seed:
			speed := p.res.Wall.Seconds() / d.res.Wall.Seconds()
			ok := speed >= 3 && d.res.Successes == 100
			fmt.Fprintf(w, "| %s | %.2fx faster (%s vs %s), %d%% success | ≥ 3x faster, 100%% success | %s |\n",
				d.sc.Name, speed, ms(d.res.Wall), ms(p.res.Wall), d.res.Successes, yes(ok))
		case d.sc.Name == "uncontended":
			t := sd.opsPerSec / sp.opsPerSec
			fmt.Fprintf(w, "| %s | throughput %.2fx | ≥ 1.0x | %s |\n", d.sc.Name, t, yes(t >= 1))
		default:
			t, l := sd.opsPerSec/sp.opsPerSec, float64(sd.p99)/float64(sp.p99)
			fair := sd.minShare >= sd.mean/2
			fmt.Fprintf(w, "| %s | throughput %.2fx, p99 %.2fx, min share %.0f of mean %.1f | throughput ≥ 2x, p99 ≤ 0.2x, min share ≥ mean/2 | %s |\n",
				d.sc.Name, t, l, sd.minShare, sd.mean, yes(t >= 2 && l <= 0.2 && fair))
		}
	}
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}
