package inventory

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"
)

// Chart geometry, in SVG user units (the template draws the axes with the
// same numbers).
const (
	chartW     = 1100
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
	Mark     string
	X, Mid   float64
	Bars     []bar
}

type chart struct {
	Title  string
	Note   string // how to read the axis, under the title
	Groups []group
	Ticks  []tick
}

type tick struct {
	Y     float64
	Label string
}

// RunInfo describes the run a report shows.
type RunInfo struct {
	Scenario  string // contention, slow-holder or crash
	Instances int    // service instances
	// Store describes where the stock and the locks live, shown under the
	// title as given (the title itself names only the scenario).
	Store string
}

// reportRow is a result with what a reader needs to judge it.
type reportRow struct {
	Result
	Info       StrategyInfo
	Mark, Word string
}

// WriteReport writes a self-contained HTML page (inline SVG and CSS, no
// external assets, no scripts) for a newcomer who has not read the docs:
// what the scenario does, a legend of the strategies that ran (what each
// does, what it proves), the verdicts with a mark, a colour and a word (✔
// pass, ~ partial, ✘ fail), charts of the requests (linear) and of the
// latency (log scale), the numbers with a glossary of the columns, and why
// a strategy that loses updates shows no overselling when the run cannot
// oversell. It fails only if w fails.
func WriteReport(w io.Writer, run RunInfo, rs []Result) error {
	counted := func(r Result) []float64 {
		return []float64{float64(r.Successes), float64(r.LockFailures + r.Errors), float64(r.LostUpdates)}
	}
	counts := buildChart("Requests per strategy: sold, refused or failed, lost sales", rs, counted,
		[]string{"ok", "fail", "lost"}, linearScale(rs, counted), func(v float64) string { return fmt.Sprint(int(v)) })
	latency := func(r Result) []float64 { return []float64{ms(r.P50), ms(r.P99)} }
	lat := buildChart("Latency per request: p50 and p99 (log scale)", rs, latency, []string{"p50", "p99"},
		logScale(rs, latency), formatMs)
	lat.Note = "Log scale: each grid line is ten times the one below, so a 2 s bar does not flatten a 2 ms one."
	rows := make([]reportRow, len(rs))
	for i, r := range rs {
		m, word := Mark(r.Kind)
		rows[i] = reportRow{Result: r, Info: Explain(r.Strategy), Mark: m, Word: word}
	}
	requests := 0
	if len(rs) > 0 {
		requests = rs[0].Requests
	}
	return reportTmpl.Execute(w, map[string]any{
		"Title":    fmt.Sprintf("dlock demo: the %s scenario, %d instances", run.Scenario, run.Instances),
		"Store":    run.Store,
		"Scenario": scenarioText(run.Scenario, run.Instances, requests),
		"Charts":   []chart{counts, lat},
		"Rows":     rows,
		"Notes":    oversellNotes(rs),
	})
}

func ms(d Duration) float64 { return float64(time.Duration(d).Microseconds()) / 1000 }

// formatMs formats a number of milliseconds for an axis or a bar.
func formatMs(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.3g s", v/1000)
	case v >= 1:
		return fmt.Sprintf("%.3g ms", v)
	}
	return fmt.Sprintf("%.2g ms", v)
}

// scale maps a value to its bar's fraction of the plot height (0 to 1);
// ticks are the values of the axis labels.
type scale struct {
	frac  func(v float64) float64
	ticks []float64
}

// linearScale runs from 0 to a round number above every value.
func linearScale(rs []Result, values func(Result) []float64) scale {
	top := 1.0
	for _, r := range rs {
		for _, v := range values(r) {
			top = math.Max(top, v)
		}
	}
	top = niceCeil(top)
	s := scale{frac: func(v float64) float64 { return math.Max(v, 0) / top }}
	for i := 0; i <= 4; i++ {
		s.ticks = append(s.ticks, top*float64(i)/4)
	}
	return s
}

// logScale runs from the power of ten at or below the smallest positive
// value to the one at or above the largest, a tick at each power, over at
// least two decades (three ticks: one decade's two do not read as a log
// scale; the bottom moves down). Values at or below the bottom get no
// height.
func logScale(rs []Result, values func(Result) []float64) scale {
	lo, hi := math.Inf(1), 0.0
	for _, r := range rs {
		for _, v := range values(r) {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if hi == 0 {
		lo, hi = 1, 10
	}
	a, b := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if b <= a {
		b = a + 1
	}
	a = min(a, b-2)
	s := scale{frac: func(v float64) float64 {
		if v <= 0 {
			return 0
		}
		return math.Max(0, (math.Log10(v)-a)/(b-a))
	}}
	for e := a; e <= b; e++ {
		s.ticks = append(s.ticks, math.Pow(10, e))
	}
	return s
}

func buildChart(title string, rs []Result, values func(Result) []float64, classes []string, sc scale, format func(float64) string) chart {
	c := chart{Title: title}
	for _, v := range sc.ticks {
		c.Ticks = append(c.Ticks, tick{Y: chartTop + plotH - plotH*sc.frac(v), Label: format(v)})
	}
	groupW := float64(chartW-chartLeft-20) / float64(max(len(rs), 1))
	barW := groupW * (1 - groupGap) / barsPerGrp
	for gi, r := range rs {
		m, _ := Mark(r.Kind)
		g := group{Strategy: r.Strategy, Kind: r.Kind, Mark: m, X: chartLeft + float64(gi)*groupW}
		g.Mid = g.X + groupW/2
		for bi, v := range values(r) {
			h := plotH * sc.frac(v)
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

// scenarioText says what the run did, for the top of the report.
func scenarioText(name string, instances, requests int) string {
	base := fmt.Sprintf("A stock service sells ProductStock_10000, which starts at %d items. %d instances of it, separate processes, share the stock in Redis. For each strategy the stock is reset to %d and the instances get %d requests between them; each request reads the stock, refuses if it is 0, and writes stock − 1. A correct lock lets one request at a time do that.",
		InitialStock, instances, InitialStock, requests)
	switch name {
	case "contention":
		return base + " The requests arrive together (within 100 ms), as in the articles' load test."
	case "slow-holder":
		return base + " Every holder keeps the lock 1.25 times its 600 ms lease, so leases end while the work is still going on."
	case "crash":
		return base + " An instance is killed (SIGKILL) right after taking the lock; the requests then go to the survivor, 50 ms apart."
	}
	return base
}

// oversellNotes explains the rows whose oversold column reads 0 although
// their strategy cannot prevent overselling: those that lost sales in a run
// with no more requests than items, and those without a shared lock that
// lost nothing because no two requests overlapped.
func oversellNotes(rs []Result) []string {
	var lost, quiet []string
	var example Result
	for _, r := range rs {
		switch {
		case r.Oversold > 0:
		case r.LostUpdates > 0 && r.Requests <= InitialStock:
			if len(lost) == 0 {
				example = r
			}
			lost = append(lost, r.Strategy)
		case !excludesAcrossInstances(r.Strategy) && r.LostUpdates == 0:
			quiet = append(quiet, r.Strategy)
		}
	}
	var notes []string
	if len(lost) > 0 {
		notes = append(notes, fmt.Sprintf("Why %s oversold 0: the lost sales are the overselling. %s sold %d items, but the stock went down by only %d: the %d it still shows were sold already, and the next buyers would be sold items that do not exist. The oversold column stays 0 here only because this run sent %d requests for %d items, so no strategy could sell more than %d. Run dlock demo --requests 150 and the oversold column of %s counts the items sold that did not exist.",
			names(lost), example.Strategy, example.Successes, InitialStock-example.FinalStock, example.LostUpdates,
			example.Requests, InitialStock, InitialStock, strings.Join(lost, " and ")))
	}
	if len(quiet) > 0 {
		notes = append(notes, fmt.Sprintf("Why %s no lost sale and oversold 0 here: in this scenario no two of their requests were inside at the same time, so nothing went wrong, by luck: nothing would have stopped two requests that overlapped, and their verdict stays ✘ fail. The contention scenario shows their lost sales, and dlock demo --requests 150 their overselling.",
			names(quiet)))
	}
	return notes
}

// names joins strategy names with the verb that follows them: "nolock
// shows", "nolock and local show".
func names(ss []string) string {
	if len(ss) == 1 {
		return ss[0] + " shows"
	}
	return strings.Join(ss, " and ") + " show"
}

//go:embed report.html.tmpl
var reportSource string

var reportTmpl = template.Must(template.New("report").Parse(reportSource))
