package reportcheck

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"
)

// oldReport is the report `dlock demo --report old.html` wrote before the
// page explained itself (the code of commit cc4f3f8; contention scenario,
// embedded server), saved as it was: the negative control of every check.
const oldReport = "testdata/main-report.html"

func failedChecks(t *testing.T, dom string) []string {
	t.Helper()
	fails, err := Check(dom)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fails {
		t.Logf("old report: %v", f)
		names = append(names, f.Check)
	}
	return names
}

// The negative control: the old report fails every check, as read from
// the file and as Chromium renders it.
func TestOldReportFailsEveryCheck(t *testing.T) {
	raw, err := os.ReadFile(oldReport)
	if err != nil {
		t.Fatal(err)
	}
	if got := failedChecks(t, string(raw)); !slices.Equal(got, All) {
		t.Errorf("file: failed %v, want every check %v", got, All)
	}
	chromium := Browser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dom, err := Render(ctx, chromium, oldReport, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := failedChecks(t, dom); !slices.Equal(got, All) {
		t.Errorf("rendered: failed %v, want every check %v", got, All)
	}
}

// Axis labels parse in the forms the report writes and the old one wrote.
func TestParseMs(t *testing.T) {
	for s, want := range map[string]float64{"0.1 ms": 0.1, "10 ms": 10, "1 s": 1000, "10 s": 10000, "500.0": 500, "0": 0} {
		if got := parseMs(s); got != want {
			t.Errorf("parseMs(%q) = %v, want %v", s, got, want)
		}
	}
}
