package reportcheck

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/net/html"
)

// The checks, by name.
const (
	// Legend: a table (its header has "what it does") explains every
	// strategy of the results table, each with what it does and what it
	// proves, and the page uses none of the docs' jargon ("rung",
	// "freed other").
	Legend = "legend"
	// Title: the page's title and heading name no address or port.
	Title = "title"
	// Verdicts: every verdict cell has a mark (✔, ~ or ✘) with a colour of
	// its own in the page's style, and the word the mark stands for (pass,
	// partial, fail) as text.
	Verdicts = "verdict-marks"
	// LogAxis: the latency chart's axis labels are successive powers of
	// ten (at least three).
	LogAxis = "log-axis"
	// NolockOversold: a nolock row whose oversold column reads 0 comes
	// with a paragraph saying why (it names nolock, oversold and the
	// --requests that would show it).
	NolockOversold = "nolock-oversold"
)

// All lists every check, in the order Check runs them.
var All = []string{Legend, Title, Verdicts, LogAxis, NolockOversold}

// Failure is one check that the page does not pass.
type Failure struct {
	Check   string // one of All
	Problem string
}

func (f Failure) Error() string { return f.Check + ": " + f.Problem }

// page is a parsed report: its text and its two tables.
type page struct {
	root    *html.Node
	style   string
	results table // header "strategy" … "verdict"
	legend  table // header with "what it does"
}

// table is a table's header texts and its rows' cells.
type table struct {
	head []string
	rows [][]*html.Node
}

// Check runs every check on dom, a report's HTML as Chromium rendered it,
// and returns the checks it fails (none: the page passes). A check whose
// subject is absent fails (no results table, no latency chart), except
// NolockOversold, which asks nothing of a run without a nolock row that
// shows oversold 0. It fails only if dom is not HTML.
func Check(dom string) ([]Failure, error) {
	root, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		return nil, fmt.Errorf("reportcheck: %w", err)
	}
	p := &page{root: root}
	for n := range root.Descendants() {
		switch {
		case isElem(n, "style"):
			p.style += text(n)
		case isElem(n, "table"):
			t := readTable(n)
			switch {
			case len(t.head) > 0 && t.head[0] == "strategy" && t.head[len(t.head)-1] == "verdict":
				p.results = t
			case indexOf(t.head, "what it does") >= 0:
				p.legend = t
			}
		}
	}
	var fails []Failure
	for _, c := range []struct {
		name string
		fn   func() string
	}{{Legend, p.checkLegend}, {Title, p.checkTitle}, {Verdicts, p.checkVerdicts}, {LogAxis, p.checkLogAxis}, {NolockOversold, p.checkOversold}} {
		if problem := c.fn(); problem != "" {
			fails = append(fails, Failure{c.name, problem})
		}
	}
	return fails, nil
}

func (p *page) strategies() []string {
	var out []string
	for _, r := range p.results.rows {
		out = append(out, text(r[0]))
	}
	return out
}

func (p *page) checkLegend() string {
	if len(p.results.rows) == 0 {
		return "no results table (header strategy … verdict) with rows"
	}
	if p.legend.head == nil {
		return "no legend table (a header with \"what it does\")"
	}
	does, shows := indexOf(p.legend.head, "what it does"), indexOf(p.legend.head, "what it proves")
	if shows < 0 {
		return "the legend has no \"what it proves\" column"
	}
	explained := map[string]bool{}
	for _, r := range p.legend.rows {
		if len(r) > max(does, shows) && len(text(r[does])) >= 20 && len(text(r[shows])) >= 20 &&
			!strings.Contains(text(r[does]), "no description") {
			explained[text(r[0])] = true
		}
	}
	for _, s := range p.strategies() {
		if !explained[s] {
			return fmt.Sprintf("strategy %q has no legend row saying what it does and what it proves", s)
		}
	}
	body := text(find(p.root, "body"))
	for _, jargon := range []string{"rung", "freed other"} {
		if strings.Contains(strings.ToLower(body), jargon) {
			return fmt.Sprintf("the page says %q, jargon the legend does not explain", jargon)
		}
	}
	return ""
}

var addrRe = regexp.MustCompile(`(?i)\b\d{1,3}(\.\d{1,3}){3}\b|\blocalhost\b|\[[0-9a-f:]+\]|:\d{2,5}\b`)

func (p *page) checkTitle() string {
	title, h1 := find(p.root, "title"), find(p.root, "h1")
	if title == nil || h1 == nil || text(title) == "" || text(h1) == "" {
		return "no title or no heading"
	}
	for _, n := range []*html.Node{title, h1} {
		if m := addrRe.FindString(text(n)); m != "" {
			return fmt.Sprintf("the %s %q names an address or port (%s)", n.Data, text(n), m)
		}
	}
	return ""
}

var markWords = map[string]string{"✔": "pass", "~": "partial", "✘": "fail"}

func (p *page) checkVerdicts() string {
	if len(p.results.rows) == 0 {
		return "no results table with rows"
	}
	type verdictCell struct {
		where string
		cell  *html.Node
	}
	var cells []verdictCell
	for _, r := range p.results.rows {
		cells = append(cells, verdictCell{"the results' verdict of " + text(r[0]), r[len(r)-1]})
	}
	if i := indexOf(p.legend.head, "verdict"); i >= 0 {
		for _, r := range p.legend.rows {
			if len(r) > i {
				cells = append(cells, verdictCell{"the legend's verdict of " + text(r[0]), r[i]})
			}
		}
	}
	for _, vc := range cells {
		where, cell := vc.where, vc.cell
		var mark *html.Node
		for n := range cell.Descendants() {
			if n.Type == html.ElementNode && markWords[text(n)] != "" {
				mark = n
				break
			}
		}
		if mark == nil {
			return fmt.Sprintf("%s (%q) has no ✔, ~ or ✘ mark of its own", where, text(cell))
		}
		word := markWords[text(mark)]
		if !regexp.MustCompile(`\b` + word + `\b`).MatchString(text(cell)) {
			return fmt.Sprintf("%s: mark %s without its word %q as text", where, text(mark), word)
		}
		if !hasColour(p.style, attr(mark, "class")) {
			return fmt.Sprintf("%s: mark %s (class %q) has no colour in the page's style", where, text(mark), attr(mark, "class"))
		}
	}
	return ""
}

// hasColour reports whether style gives one of classes a text colour.
func hasColour(style, classes string) bool {
	for _, c := range strings.Fields(classes) {
		if c == "mark" {
			continue
		}
		if regexp.MustCompile(`\.` + regexp.QuoteMeta(c) + `\{[^}]*\bcolor:`).MatchString(style) {
			return true
		}
	}
	return false
}

func (p *page) checkLogAxis() string {
	var chart *html.Node
	for n := range p.root.Descendants() {
		if isElem(n, "svg") && strings.Contains(strings.ToLower(attr(n, "aria-label")), "latency") {
			chart = n
		}
	}
	if chart == nil {
		return "no latency chart (an svg whose aria-label says latency)"
	}
	var ticks []float64
	var labels []string
	for n := range chart.Descendants() {
		if isElem(n, "text") && (strings.Contains(attr(n, "class"), "tick") || attr(n, "text-anchor") == "end") {
			labels = append(labels, text(n))
			ticks = append(ticks, parseMs(text(n)))
		}
	}
	if len(ticks) < 3 {
		return fmt.Sprintf("the latency axis has %d labels %q, want at least 3", len(ticks), labels)
	}
	for i := 1; i < len(ticks); i++ {
		if ratio := ticks[i] / ticks[i-1]; ticks[i-1] <= 0 || math.Abs(ratio-10) > 0.1 {
			return fmt.Sprintf("the latency axis labels %q are not successive powers of ten (a log scale)", labels)
		}
	}
	return ""
}

// parseMs reads an axis label: "0.1 ms", "10 ms", "1 s", or a bare number
// of milliseconds; NaN if it is none of them.
func parseMs(s string) float64 {
	unit := 1.0
	if v, ok := strings.CutSuffix(s, " ms"); ok {
		s = v
	} else if v, ok := strings.CutSuffix(s, " s"); ok {
		s, unit = v, 1000
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return math.NaN()
	}
	return v * unit
}

func (p *page) checkOversold() string {
	col := indexOf(p.results.head, "oversold")
	for _, r := range p.results.rows {
		if text(r[0]) != "nolock" || col < 0 || col >= len(r) || text(r[col]) != "0" {
			continue
		}
		for n := range p.root.Descendants() {
			if isElem(n, "p") {
				t := text(n)
				if strings.Contains(t, "nolock") && strings.Contains(t, "oversold") && strings.Contains(t, "--requests") {
					return ""
				}
			}
		}
		return "nolock shows oversold 0 and no paragraph says why (naming nolock, oversold and --requests)"
	}
	return ""
}

func readTable(n *html.Node) table {
	var t table
	for tr := range n.Descendants() {
		if !isElem(tr, "tr") {
			continue
		}
		var cells []*html.Node
		header := false
		for c := tr.FirstChild; c != nil; c = c.NextSibling {
			if isElem(c, "th") || isElem(c, "td") {
				cells = append(cells, c)
				header = header || isElem(c, "th")
			}
		}
		switch {
		case header && t.head == nil:
			for _, c := range cells {
				t.head = append(t.head, text(c))
			}
		case !header && len(cells) > 0:
			t.rows = append(t.rows, cells)
		}
	}
	return t
}

func isElem(n *html.Node, tag string) bool { return n.Type == html.ElementNode && n.Data == tag }

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func find(root *html.Node, tag string) *html.Node {
	for n := range root.Descendants() {
		if isElem(n, tag) {
			return n
		}
	}
	return nil
}

// text is n's text with runs of white space made one space, trimmed.
func text(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	for d := range n.Descendants() {
		hidden := d.Parent != nil && d.Parent != n && (isElem(d.Parent, "style") || isElem(d.Parent, "title"))
		if d.Type == html.TextNode && !hidden {
			b.WriteString(d.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// indexOf returns the index of the first of ss that starts with prefix, or -1.
func indexOf(ss []string, prefix string) int {
	for i, s := range ss {
		if strings.HasPrefix(s, prefix) {
			return i
		}
	}
	return -1
}
