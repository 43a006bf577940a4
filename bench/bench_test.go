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
//
// The watchdog's 3 s lease asks Redis for 10 000 / 1 s renewals a second;
// a 900 ms lease asked 33 000, more than a loaded 2-core CI machine serves
// (the other bench packages run beside this one), and leases ran out. The
// 1.5 s hold still renews every lease at least once.
func TestQuick(t *testing.T) {
	f := flags{scenarios: "all", libs: "dlock,dlock-noread,floor", duration: 300 * time.Millisecond,
		wdLease: 3 * time.Second, wdHold: 1500 * time.Millisecond, wdLocks: 10000, tuning: defaultTuning}
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
		if r.ServerCPU <= 0 {
			t.Errorf("%s/%s: no server CPU measured", r.Scenario, r.Lib)
		}
	}
	for _, v := range violations(rep) {
		t.Error(v)
	}
	printTable(testWriter{t}, rep)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// TestRounds runs two scenarios in three rounds: counts add up over the
// rounds, the counter checks still hold, and every dlock row gets a ratio
// against the floor from its three rounds.
func TestRounds(t *testing.T) {
	f := flags{scenarios: "uncontended-1,seed-2x50", libs: "dlock,floor", duration: 300 * time.Millisecond,
		rounds: 3, tuning: defaultTuning}
	rep, err := run(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if len(r.RoundOps) != 3 {
			t.Errorf("%s/%s: %d rounds, want 3", r.Scenario, r.Lib, len(r.RoundOps))
		}
		if r.Scenario == "seed-2x50" && (r.Successes != 300 || r.Expected != 0 || r.Final != 0) {
			t.Errorf("seed over 3 rounds: %d sold, final %d, expected %d; want 300, 0, 0", r.Successes, r.Final, r.Expected)
		}
	}
	for _, v := range violations(rep) {
		t.Error(v)
	}
	rs := roundRatios(rep)
	if len(rs) != 2 {
		t.Fatalf("%d round ratios, want one per scenario: %+v", len(rs), rs)
	}
	for _, r := range rs {
		if r.rounds != 3 || r.lib != "floor" || !(r.lo <= r.median && r.median <= r.hi) || r.lo <= 0 {
			t.Errorf("ratio %+v", r)
		}
	}
	printRoundRatios(testWriter{t}, rep)
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{1, 2, 10}, 2}, {[]float64{1, 2, 4, 10}, 3}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseServerCPU(t *testing.T) {
	got, err := parseServerCPU("# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250001\r\nused_cpu_sys_children:9.0\r\n")
	if want := 1750001 * time.Microsecond; err != nil || got != want {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"# CPU\r\nused_cpu_sys:1.5\r\n", "used_cpu_sys:x\r\nused_cpu_user:1\r\n"} {
		if _, err := parseServerCPU(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
