package inventory

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"example.com/dlock/cmd/dlock/internal/reportcheck"
)

// runResults is a run of every strategy, the store strategies included,
// shaped like a real one: nolock and local lose sales, v1–v5 and
// sql-for-update refuse buyers, the waiting locks sell all, Redlock's p99
// is 2 s beside v1's milliseconds. crash gives the crash scenario's run,
// where nolock and local lose nothing because nothing overlaps.
func runResults(crash bool) (RunInfo, []Result) {
	name, requests := "contention", 100
	if crash {
		name, requests = "crash", 20
	}
	sc, _ := Scenarios(name, 0, 0)
	all := append(slices.Clip(Strategies), StoreStrategies()...)
	var rs []Result
	for i, s := range all {
		sold, final := requests, int64(InitialStock-requests)
		var as []Answer
		switch {
		case s == "nolock" || s == "local":
			if !crash {
				final = int64(InitialStock - 30 - i)
			}
			as = answers(sold, Answer{Outcome: Sold, Overlap: !crash})
		case strings.HasPrefix(s, "v") || s == SQLForUpdateStrategy:
			sold = requests / 3
			final = int64(InitialStock - sold)
			as = append(answers(sold, Answer{Outcome: Sold}), answers(requests-sold, Answer{Outcome: LockFailed})...)
		default:
			as = answers(sold, Answer{Outcome: Sold})
		}
		lat := lats(requests)
		if s == "redlock" {
			for j := range lat {
				lat[j] *= 20
			}
		}
		rs = append(rs, summarise(s, sc, as, lat, 0, final, time.Second))
	}
	return RunInfo{Scenario: name, Instances: 2, Store: "embedded Redis-protocol server (miniredis), Redlock over 3 nodes"}, rs
}

// renderChecks writes the report of rs, renders it in headless Chromium
// and returns what reportcheck finds wrong with the page Chromium built.
func renderChecks(t *testing.T, chromium string, run RunInfo, rs []Result) []reportcheck.Failure {
	t.Helper()
	var b bytes.Buffer
	if err := WriteReport(&b, run, rs); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dom, err := reportcheck.Render(ctx, chromium, page, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fails, err := reportcheck.Check(dom)
	if err != nil {
		t.Fatal(err)
	}
	return fails
}

// A newcomer who opens only the report, as Chromium shows it, finds every
// strategy that ran (store strategies included) explained, no address in
// the title, a marked and coloured verdict, a log latency axis, and why
// nolock shows no overselling: in the contention run (lost sales, 100
// requests for 100 items) and in the crash run (nothing overlapped).
func TestReportExplainsItselfInChromium(t *testing.T) {
	chromium := reportcheck.Browser(t)
	for _, crash := range []bool{false, true} {
		run, rs := runResults(crash)
		if len(rs) != len(Strategies)+len(StoreStrategies()) {
			t.Fatalf("%d results", len(rs))
		}
		for _, f := range renderChecks(t, chromium, run, rs) {
			t.Errorf("%s scenario: %v", run.Scenario, f)
		}
	}
}

// The checks can fail: each mutation of a good report, made as a
// regression would, fails the check that guards it and only that one.
func TestReportChecksCatchEachRegression(t *testing.T) {
	run, rs := runResults(false)
	var b bytes.Buffer
	if err := WriteReport(&b, run, rs); err != nil {
		t.Fatal(err)
	}
	good := b.String()
	legendRow := good[strings.Index(good, `<tr data-strategy="v3">`):]
	legendRow = legendRow[:strings.Index(legendRow, "</tr>")+len("</tr>")]
	for _, m := range []struct {
		check    string
		old, new string
	}{
		{reportcheck.Legend, legendRow, ""},
		{reportcheck.Legend, "deleted another's lock</th>", "freed other</th>"},
		{reportcheck.Title, "<title>dlock demo: the contention scenario", "<title>dlock demo: contention (miniredis on 127.0.0.1:39609)"},
		{reportcheck.Verdicts, `<span class="mark mark-partial" aria-hidden="true">~</span>`, ""},
		{reportcheck.Verdicts, "<strong>fail</strong>", "<strong>bad</strong>"},
		{reportcheck.Verdicts, ".mark-pass{color:#1b5e20;", ".mark-pass{"},
		{reportcheck.LogAxis, `text-anchor="end" dominant-baseline="middle">1 s</text>`, `text-anchor="end" dominant-baseline="middle">500 ms</text>`},
		{reportcheck.NolockOversold, "Run dlock demo --requests 150", "Run more requests"},
	} {
		bad := strings.ReplaceAll(good, m.old, m.new)
		if bad == good {
			t.Fatalf("mutation %q left the page unchanged", m.old)
		}
		fails, err := reportcheck.Check(bad)
		if err != nil {
			t.Fatal(err)
		}
		if len(fails) != 1 || fails[0].Check != m.check {
			t.Errorf("replacing %q with %q: failures %v, want %s alone", m.old, m.new, fails, m.check)
		}
	}
	if fails, err := reportcheck.Check(good); err != nil || len(fails) != 0 {
		t.Errorf("the unmutated page fails %v (%v)", fails, err)
	}
}
