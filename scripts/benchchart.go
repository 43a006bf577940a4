//go:build ignore

// benchchart draws bench/ratios.svg, the chart in BENCHMARKS.md, from
// bench/figures.csv: one bar per store, scenario and peer, the median
// dlock ÷ peer ratio on a log scale, with the lowest and highest round.
//
//	go run scripts/benchchart.go
package main

import (
	"encoding/csv"
	"fmt"
	"log"
	"math"
	"os"
	"strconv"
	"strings"
)

func main() {
	f, err := os.Open("bench/figures.csv")
	if err != nil {
		log.Fatal(err)
	}
	r := csv.NewReader(f)
	r.Comment = '#'
	rows, err := r.ReadAll()
	if err != nil {
		log.Fatal(err)
	}
	rows = rows[1:] // header
	const (
		left, width, rowH, top = 330.0, 520.0, 18.0, 60.0
		lo, hi                 = 0.5, 40.0
	)
	x := func(v float64) float64 { return left + width*math.Log(v/lo)/math.Log(hi/lo) }
	var b strings.Builder
	height := top + rowH*float64(len(rows)) + 12*5 + 40
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", left+width+60, height)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	b.WriteString(`<text x="10" y="20" font-size="15" font-weight="bold">dlock ÷ peer, per store and scenario (log scale; right of 1× = dlock faster)</text>` + "\n")
	b.WriteString(`<text x="10" y="38" fill="#555">2 vCPUs (AMD EPYC), go1.26.8; bar: median of the rounds; whisker: lowest–highest round. Source: bench/figures.csv</text>` + "\n")
	y, store := top, ""
	for _, row := range rows {
		if row[0] != store {
			store = row[0]
			if y > top {
				y += 12
			}
			fmt.Fprintf(&b, `<text x="10" y="%.0f" font-weight="bold">%s</text>`+"\n", y+12, store)
		}
		med := num(row[3])
		fill := "#4a7bd0"
		if med < 1 {
			fill = "#d0704a"
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%s ÷ %s</text>`+"\n", left-8, y+12, row[1], row[2])
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="%s"/>`+"\n", x(lo), y+3, x(med)-x(lo), rowH-6, fill)
		if row[4] != "" {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#222"/>`+"\n", x(num(row[4])), x(num(row[5])), y+rowH/2, y+rowH/2)
		}
		end := med
		if row[5] != "" {
			end = math.Max(med, num(row[5]))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="11">%s×</text>`+"\n", x(end)+4, y+12, row[3])
		y += rowH
	}
	for _, t := range []float64{0.5, 1, 2, 5, 10, 20, 40} {
		stroke := "#ccc"
		if t == 1 {
			stroke = "#222"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="%s"/>`+"\n", x(t), x(t), top, y, stroke)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%g×</text>`+"\n", x(t), y+16, t)
	}
	b.WriteString("</svg>\n")
	if err := os.WriteFile("bench/ratios.svg", []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}

func num(s string) float64 {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0
	}
	return v
}
