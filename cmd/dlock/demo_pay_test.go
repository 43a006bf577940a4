package main

import (
	"encoding/json"
	"strings"
	"testing"

	"example.com/dlock/cmd/dlock/internal/payment"
)

// demo --scenario pay-twice --json, in process on the embedded server:
// every field as docs/cli.md documents it, and the provider's counts per
// strategy (two charges per order without the guard or with the
// fence-keyed control, one with the guard and after the crash).
func TestPayTwiceJSONMatchesDocs(t *testing.T) {
	fields := jsonDocs(t)["demo --scenario pay-twice"]
	if len(fields) == 0 {
		t.Fatal("docs/cli.md documents no fields of demo --scenario pay-twice --json")
	}
	const orders = 3
	code, out, stderr := runCLI(t, "demo", "--scenario", "pay-twice", "--json", "--requests", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if seen := checkJSON(t, fields, out); seen["results[].sample_error"] {
		t.Errorf("a failure reported: %s", out)
	}
	var doc payOutput
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	perOrder := map[string]int{payment.NoGuard: 2, payment.NoGuardRetry: 2, payment.Guarded: 1, payment.GuardCrash: 1, payment.GuardFenceKey: 2}
	if doc.Scenario != "pay-twice" || !doc.Embedded || len(doc.Results) != len(perOrder) {
		t.Fatalf("document: %s", out)
	}
	for _, r := range doc.Results {
		if r.Orders != orders || r.Charges != perOrder[r.Strategy]*orders || r.Duplicates != r.Charges-orders {
			t.Errorf("%s: %d orders, %d charges, %d duplicates; want %d, %d, %d", r.Strategy, r.Orders, r.Charges,
				r.Duplicates, orders, perOrder[r.Strategy]*orders, (perOrder[r.Strategy]-1)*orders)
		}
	}
}

// The flags pay-twice does not take, and bad values, are usage errors
// before anything runs.
func TestPayTwiceRefusesFlagsItDoesNotTake(t *testing.T) {
	for _, args := range [][]string{
		{"--report", "x.html"}, {"--store", "redis://127.0.0.1:1"}, {"--redis", "127.0.0.1:1"},
		{"--strategies", "v1"}, {"--requests", "1001"}, {"--instances", "1"}, {"--work", "1s"},
	} {
		code, out, stderr := runCLI(t, append([]string{"demo", "--scenario", "pay-twice"}, args...)...)
		if code != ExitUsage || out != "" || strings.Contains(stderr, "store:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d before the store starts", args, code, out, stderr, ExitUsage)
		}
	}
}
