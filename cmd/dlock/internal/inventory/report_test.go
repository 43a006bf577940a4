package inventory

import (
	"bytes"
	"context"
	"encoding/xml"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"example.com/dlock/cmd/dlock/internal/reportcheck"
)

func sampleResults() []Result {
	sc, _ := Scenarios("contention", 0, 0)
	var rs []Result
	for i, s := range Strategies {
		as := append(answers(60, Answer{Outcome: Sold}), answers(40, Answer{Outcome: LockFailed})...)
		rs = append(rs, summarise(s, sc, as, lats(100+10*i), 0, int64(40+3*i), time.Second))
	}
	return rs
}

var svgRe = regexp.MustCompile(`(?s)<svg .*?</svg>`)

// svgGroups parses every inline SVG of page as XML and returns, per chart,
// the strategy of each bar group and its number of bars.
func svgGroups(t *testing.T, page string) [][]string {
	t.Helper()
	svgs := svgRe.FindAllString(page, -1)
	if len(svgs) == 0 {
		t.Fatal("no inline SVG in the report")
	}
	var charts [][]string
	for _, s := range svgs {
		var doc struct {
			Groups []struct {
				Class    string `xml:"class,attr"`
				Strategy string `xml:"data-strategy,attr"`
				Rects    []struct {
					Height float64 `xml:"height,attr"`
				} `xml:"rect"`
			} `xml:"g"`
		}
		if err := xml.Unmarshal([]byte(s), &doc); err != nil {
			t.Fatalf("SVG does not parse: %v", err)
		}
		var names []string
		for _, g := range doc.Groups {
			if g.Class == "bar-group" && len(g.Rects) >= 2 {
				names = append(names, g.Strategy)
			}
		}
		charts = append(charts, names)
	}
	return charts
}

func TestReportHasOneBarGroupPerStrategy(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReport(&b, RunInfo{Scenario: "test <&> report", Instances: 2}, sampleResults()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, "http://") && !strings.Contains(page, `xmlns="http://www.w3.org/2000/svg"`) ||
		strings.Contains(page, "<script") || strings.Contains(page, "<link") || strings.Contains(page, "src=") {
		t.Fatal("the report must be self-contained")
	}
	if !strings.Contains(page, "test &lt;&amp;&gt; report") {
		t.Fatal("the title must be escaped")
	}
	charts := svgGroups(t, page)
	if len(charts) != 2 {
		t.Fatalf("want 2 charts (counts, latency), got %d", len(charts))
	}
	for _, names := range charts {
		if strings.Join(names, ",") != strings.Join(Strategies, ",") {
			t.Fatalf("bar groups %v, want %v", names, Strategies)
		}
	}
}

// The report renders in a real browser: headless Chromium loads it, the
// DOM it builds has every bar group, and the screenshot is not blank.
func TestReportRendersInChromium(t *testing.T) {
	chromium := reportcheck.Browser(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := WriteReport(&b, RunInfo{Scenario: "contention", Instances: 2}, sampleResults()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "out.png")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dom, err := reportcheck.Render(ctx, chromium, page, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range svgGroups(t, dom) {
		if len(names) != len(Strategies) {
			t.Fatalf("rendered DOM has bar groups %v", names)
		}
	}
	if err := reportcheck.Screenshot(ctx, chromium, page, t.TempDir(), shot); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// Count the bars' colours: green (sold) and orange (refused) must show.
	var green, orange int
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			r, g, b = r>>8, g>>8, b>>8
			switch {
			case r < 80 && g > 100 && g < 150 && b < 80:
				green++
			case r > 200 && g > 80 && g < 130 && b < 40:
				orange++
			}
		}
	}
	if green < 500 || orange < 200 {
		t.Fatalf("screenshot shows no bars (green %d, orange %d px)", green, orange)
	}
	if os.Getenv("DLOCK_KEEP_SCREENSHOT") != "" {
		_ = os.WriteFile(os.Getenv("DLOCK_KEEP_SCREENSHOT"), mustRead(t, shot), 0o644)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A7: a linear axis ends near the largest value (2059 ms: 2500, not 5000),
// the title names the run and not the store, and the table keeps the
// oversold and overlaps columns of the terminal's table.
func TestA7ReportAxisAndColumns(t *testing.T) {
	for v, want := range map[float64]float64{2059: 2500, 100: 100, 101: 120, 0.7: 0.8, 41: 50, 5001: 6000} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", v, got, want)
		}
	}
	rs := sampleResults()
	rs[0].Oversold, rs[0].Overlaps = 7, 93
	var b bytes.Buffer
	if err := WriteReport(&b, RunInfo{Scenario: "contention", Instances: 2, Store: "redis 127.0.0.1:6379"}, rs); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, "<title>dlock demo: the contention scenario, 2 instances</title>") ||
		!strings.Contains(page, "Store: redis 127.0.0.1:6379.") {
		t.Error("the title names the scenario, the store line under it the store")
	}
	if !strings.Contains(page, "<th>oversold</th><th>overlaps</th>") || !strings.Contains(page, "<td>7</td><td>93</td>") {
		t.Error("the table lacks the oversold and overlaps columns")
	}
}

// The latency axis spans at least two decades (three labels) when every
// latency falls within one (a quiet run on one store: 12 to 80 ms), and
// its labels stay successive powers of ten around every value.
func TestLatencyAxisSpansTwoDecadesAtLeast(t *testing.T) {
	for _, vs := range [][]float64{{12, 80}, {10, 10}, {0.3, 0.9}, {2, 3000}} {
		rs := []Result{{}}
		sc := logScale(rs, func(Result) []float64 { return vs })
		if len(sc.ticks) < 3 {
			t.Errorf("values %v: ticks %v, want at least 3", vs, sc.ticks)
			continue
		}
		for i := 1; i < len(sc.ticks); i++ {
			if r := sc.ticks[i] / sc.ticks[i-1]; math.Abs(r-10) > 1e-9 {
				t.Errorf("values %v: ticks %v are not successive powers of ten", vs, sc.ticks)
			}
		}
		if lo, hi := sc.ticks[0], sc.ticks[len(sc.ticks)-1]; vs[0] < lo || vs[len(vs)-1] > hi {
			t.Errorf("values %v outside the axis %v..%v", vs, lo, hi)
		}
	}
}
