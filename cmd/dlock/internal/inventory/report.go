package inventory

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"time"
)

// Chart geometry, in SVG user units.
const (
	chartW     = 1100
	chartH     = 300
	chartLeft  = 60
	chartTop   = 30
	plotH      = 220
	groupGap   = 0.25 // fraction of a group's width left empty
	barsPerGrp = 3
)

type bar struct {
	X, Y, W, H float64
	CX         float64 // centre, for the value label
	Class      string
	Label      string
	Title      string
}

type group struct {
	Strategy string
	Kind     string
	X, Mid   float64
	Bars     []bar
}

type chart struct {
	Title  string
	Groups []group
	Ticks  []tick
}

type tick struct {
	Y     float64
	Label string
}

// WriteReport writes a self-contained HTML page (inline SVG and CSS, no
// external assets) charting rs: successes, lock failures and lost updates
// per strategy, and p50/p99 latency, followed by the columns of WriteTable
// and the verdicts. title is the page's heading as given. It fails only if
// w fails.
func WriteReport(w io.Writer, title string, rs []Result) error {
	counts := buildChart("Requests per strategy: sold, refused or failed, lost updates", rs, func(r Result) []float64 {
		return []float64{float64(r.Successes), float64(r.LockFailures + r.Errors), float64(r.LostUpdates)}
	}, []string{"ok", "fail", "lost"}, func(v float64) string { return fmt.Sprint(int(v)) })
	lat := buildChart("Latency per request: p50 and p99 (ms)", rs, func(r Result) []float64 {
		return []float64{ms(r.P50), ms(r.P99)}
	}, []string{"p50", "p99"}, func(v float64) string { return fmt.Sprintf("%.1f", v) })
	return reportTmpl.Execute(w, map[string]any{"Title": title, "Charts": []chart{counts, lat}, "Results": rs})
}

func ms(d Duration) float64 { return float64(time.Duration(d).Microseconds()) / 1000 }

func buildChart(title string, rs []Result, values func(Result) []float64, classes []string, format func(float64) string) chart {
	top := 1.0
	for _, r := range rs {
		for _, v := range values(r) {
			top = math.Max(top, v)
		}
	}
	top = niceCeil(top)
	c := chart{Title: title}
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		c.Ticks = append(c.Ticks, tick{Y: chartTop + plotH - plotH*v/top, Label: format(v)})
	}
	groupW := float64(chartW-chartLeft-20) / float64(max(len(rs), 1))
	barW := groupW * (1 - groupGap) / barsPerGrp
	for gi, r := range rs {
		g := group{Strategy: r.Strategy, Kind: r.Kind, X: chartLeft + float64(gi)*groupW}
		g.Mid = g.X + groupW/2
		for bi, v := range values(r) {
			h := plotH * math.Max(v, 0) / top
			x := g.X + groupW*groupGap/2 + float64(bi)*barW
			g.Bars = append(g.Bars, bar{X: x, Y: chartTop + plotH - h, W: barW - 2, H: h, CX: x + (barW-2)/2, Class: classes[bi],
				Label: format(v), Title: fmt.Sprintf("%s %s: %s", r.Strategy, classes[bi], format(v))})
		}
		c.Groups = append(c.Groups, g)
	}
	return c
}

// niceCeil rounds v up to a round axis maximum: 1, 1.2, 1.5, 2, 2.5, 3, 4,
// 5, 6 or 8 times a power of ten, so that the tallest bar fills at least
// 4/5 of the plot (with 1, 2, 5 alone, 2059 ms got an axis to 5000).
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

var reportTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:20px} h2{font-size:16px;margin:8px 0}
svg{background:#fafafa;border:1px solid #ddd}
.ok{fill:#2e7d32}.fail{fill:#ef6c00}.lost{fill:#c62828}.p50{fill:#1565c0}.p99{fill:#90caf9}
.axis{stroke:#999}.grid{stroke:#e4e4e4}
text{font-size:12px}.val{font-size:10px;text-anchor:middle}.name{text-anchor:middle;font-weight:600}
.verdict-correct{fill:#2e7d32}.verdict-failed_requests{fill:#ef6c00}.verdict-lost_updates,.verdict-unsafe,.verdict-deadlock{fill:#c62828}
table{border-collapse:collapse;margin-top:16px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,td:last-child{text-align:left}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}
</style></head><body>
<h1>{{.Title}}</h1>
{{range $ci, $c := .Charts}}
<h2>{{$c.Title}}</h2>
<div class="legend">{{if eq $ci 0}}<span style="background:#2e7d32"></span>sold<span style="background:#ef6c00"></span>could not get lock / error<span style="background:#c62828"></span>lost updates{{else}}<span style="background:#1565c0"></span>p50<span style="background:#90caf9"></span>p99{{end}}</div>
<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="1100" height="300" viewBox="0 0 1100 300" role="img" aria-label="{{$c.Title}}">
{{range $c.Ticks}}<line class="grid" x1="60" x2="1080" y1="{{.Y}}" y2="{{.Y}}"/><text x="54" y="{{.Y}}" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>
{{end}}<line class="axis" x1="60" x2="60" y1="30" y2="250"/><line class="axis" x1="60" x2="1080" y1="250" y2="250"/>
{{range $c.Groups}}<g class="bar-group" data-strategy="{{.Strategy}}">
{{range .Bars}}<rect class="{{.Class}}" x="{{printf "%.1f" .X}}" y="{{printf "%.1f" .Y}}" width="{{printf "%.1f" .W}}" height="{{printf "%.1f" .H}}"><title>{{.Title}}</title></rect><text class="val" x="{{printf "%.1f" .CX}}" y="{{printf "%.1f" .Y}}" dy="-3">{{.Label}}</text>
{{end}}<text class="name verdict-{{.Kind}}" x="{{printf "%.1f" .Mid}}" y="270">{{.Strategy}}</text>
</g>
{{end}}</svg>
{{end}}
<table><tr><th>strategy</th><th>ok</th><th>lock fail</th><th>sold out</th><th>errors</th><th>final</th><th>lost</th><th>oversold</th><th>overlaps</th><th>freed other</th><th>p50</th><th>p99</th><th>wall</th><th>verdict</th></tr>
{{range .Results}}<tr><td>{{.Strategy}}</td><td>{{.Successes}}</td><td>{{.LockFailures}}</td><td>{{.OutOfStock}}</td><td>{{.Errors}}</td><td>{{.FinalStock}}</td><td>{{.LostUpdates}}</td><td>{{.Oversold}}</td><td>{{.Overlaps}}</td><td>{{.ReleasedOther}}</td><td>{{.P50}}</td><td>{{.P99}}</td><td>{{.Wall}}</td><td>{{.Verdict}}</td></tr>
{{end}}</table>
</body></html>
`))
