package main

import (
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(child(spec)) // a second process of a two-process scenario
	}
	os.Exit(m.Run())
}

// TestQuick runs every scenario briefly for dlock (with and without WithRead)
// and the floor and checks the protected counter of each (the peers are
// left to `go run . -quick`).
func TestQuick(t *testing.T) {
	f := flags{scenarios: "all", libs: "dlock,dlock-noread,floor", duration: 300 * time.Millisecond,
		wdLease: 900 * time.Millisecond, wdHold: time.Second, wdLocks: 10000, tuning: defaultTuning}
	rep, err := run(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(scenarios)*3 {
		t.Fatalf("%d results, want %d", len(rep.Results), len(scenarios)*3)
	}
	var _ readLocker = &dlockLocker{}
	if _, ok := locker(dlockNoRead{}).(readLocker); ok {
		t.Fatal("dlock-noread can read with the grant: it would not measure the old path")
	}
	for _, r := range rep.Results {
		if r.Skipped != "" {
			continue
		}
		if r.Successes == 0 || r.Failures != 0 {
			t.Errorf("%s/%s: %d successes, %d failures (first: %s)", r.Scenario, r.Lib, r.Successes, r.Failures, r.FirstErr)
		}
	}
	for _, v := range violations(rep) {
		t.Error(v)
	}
	printTable(testWriter{t}, rep)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
