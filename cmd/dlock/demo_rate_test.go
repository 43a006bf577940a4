package main

import (
	"encoding/json"
	"strings"
	"testing"

	"example.com/dlock/cmd/dlock/internal/ratedemo"
)

// demo --scenario rate-limit --json, in process on the embedded server:
// every field as docs/cli.md documents it, and the counts per strategy
// across two instances of 10 threads: 5 per instance with a limiter in
// each or a window on each instance's skewed clock (over the limit), 5 in
// all with dlock's, the clocks skewed or not (exact unless the burst
// outlasted an emission interval, then at most limit_allows).
func TestRateLimitDemoJSONMatchesDocs(t *testing.T) {
	fields := jsonDocs(t)["demo --scenario rate-limit"]
	if len(fields) == 0 {
		t.Fatal("docs/cli.md documents no fields of demo --scenario rate-limit --json")
	}
	code, out, stderr := runCLI(t, "demo", "--scenario", "rate-limit", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if seen := checkJSON(t, fields, out); seen["results[].sample_error"] {
		t.Errorf("a failure reported: %s", out)
	}
	var doc rateOutput
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Scenario != "rate-limit" || !doc.Embedded || doc.Instances != 2 || doc.Threads != 10 ||
		doc.Rate != 5 || doc.Burst != 5 || doc.PeriodMS != 1000 || len(doc.Results) != len(ratedemo.Strategies) {
		t.Fatalf("document: %s", out)
	}
	for _, r := range doc.Results {
		shared := r.Strategy == ratedemo.Shared || r.Strategy == ratedemo.SharedSkew
		switch {
		case r.Requests != 20 || r.Errors != 0 || len(r.PerInstance) != 2:
			t.Errorf("%s: %d requests, %d errors, %d instances; want 20, 0, 2", r.Strategy, r.Requests, r.Errors, len(r.PerInstance))
		case shared && (r.Admitted < 5 || r.Admitted > r.Allowed || r.Kind != ratedemo.KindCorrect):
			t.Errorf("%s: %d admitted (%s), limit allows %d; want 5, correct", r.Strategy, r.Admitted, r.Kind, r.Allowed)
		case !shared && (r.PerInstance[0] < 5 || r.PerInstance[1] < 5 || r.Admitted > r.Allowed && r.Kind != ratedemo.KindOverLimit):
			t.Errorf("%s: %v admitted (%s); want at least 5 each, over the limit", r.Strategy, r.PerInstance, r.Kind)
		}
	}
}

// The flags rate-limit does not take, and bad values, are usage errors
// before anything runs.
func TestRateLimitDemoRefusesFlagsItDoesNotTake(t *testing.T) {
	for _, args := range [][]string{
		{"--report", "x.html"}, {"--store", "redis://127.0.0.1:1"}, {"--redis", "127.0.0.1:1"},
		{"--strategies", "guard"}, {"--requests", "1001"}, {"--instances", "1"}, {"--work", "1s"},
	} {
		code, out, stderr := runCLI(t, append([]string{"demo", "--scenario", "rate-limit"}, args...)...)
		if code != ExitUsage || out != "" || strings.Contains(stderr, "store:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d before the store starts", args, code, out, stderr, ExitUsage)
		}
	}
}
