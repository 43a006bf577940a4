package main

import (
	"fmt"
	"html"
	"strings"
)

var libColors = map[string]string{
	"dlock": "#1b7f3b", "dlock-noread": "#6fbf73", "floor": "#888888", "redsync": "#c0392b", "redsync-tuned": "#e67e22",
	"redislock": "#2c5aa0", "redislock-tuned": "#5dade2", "dlock-fair": "#8e44ad",
}

// renderSVG draws, per scenario, one bar per library: throughput relative to
// the best library of that scenario, labelled with ops/s, p99 and failures.
func renderSVG(rep *report) string {
	type group struct {
		name string
		rs   []*result
	}
	var groups []group
	for _, r := range rep.Results {
		if r.Skipped != "" {
			continue
		}
		if len(groups) == 0 || groups[len(groups)-1].name != r.Scenario {
			groups = append(groups, group{name: r.Scenario})
		}
		g := &groups[len(groups)-1]
		g.rs = append(g.rs, r)
	}
	const left, barMax, rowH, width = 150, 420, 18, 900
	height := 60
	for _, g := range groups {
		height += 26 + rowH*len(g.rs)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="22" font-size="15" font-weight="bold">dlock vs peers: successful critical sections per second (bar: relative to the best of each scenario)</text>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="40" fill="#555">%s, %d CPUs, %s, Redis %s, %s</text>`+"\n", html.EscapeString(rep.CPU), rep.NumCPU, rep.Go, rep.Redis, roundsNote(rep.Rounds))
	y := 60
	for _, g := range groups {
		best := 0.0
		for _, r := range g.rs {
			best = max(best, r.opsPerSec())
		}
		fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s</text>`+"\n", y+14, g.name)
		y += 20
		for _, r := range g.rs {
			w := 0.0
			if best > 0 {
				w = barMax * r.opsPerSec() / best
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`, left-8, y+13, r.Lib)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`, left, y+2, w, rowH-4, libColors[r.Lib])
			label := fmt.Sprintf("%.0f ops/s · p99 %s · %d failed", r.opsPerSec(), ms(r.Lat.quantile(0.99)), r.Failures)
			if r.Final != r.Expected {
				label += " · COUNTER WRONG"
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#222">%s</text>`+"\n", float64(left)+w+6, y+13, html.EscapeString(label))
			y += rowH
		}
		y += 6
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// roundsNote says how the figures were gathered (see rounds.go).
func roundsNote(n int) string {
	if n <= 1 {
		return "one run per library"
	}
	return fmt.Sprintf("%d interleaved rounds per scenario, figures over all rounds", n)
}
