package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

func TestMain(m *testing.M) {
	cmp.ServeChild(childEnv, runProcess) // a process of the 2x25 and seed scenarios
	os.Exit(m.Run())
}

// TestQuick runs every scenario for 300 ms against a real etcd: the program
// works end to end, nothing overlaps, the seed scenario sells exactly its
// stock, and the table has a row per scenario and library. Skipped without
// the etcd binary (fails under CI=true).
func TestQuick(t *testing.T) {
	const bin = "/usr/bin/etcd"
	if _, err := exec.LookPath(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no %s: install etcd-server", bin)
		}
		t.Skipf("no %s (install Debian's etcd-server)", bin)
	}
	libs := append(slices.Clone(libNames), extraLibs...)
	var out strings.Builder
	start := time.Now()
	if err := run(&out, bin, 300*time.Millisecond, "all", 1, libs, "(go test ./etcd: TestQuick)"); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("%v\n%s", time.Since(start), out.String())
	for _, sc := range scenarios {
		for _, lib := range libs {
			if !strings.Contains(out.String(), "| "+sc.Name+" | "+lib+" |") {
				t.Errorf("no row for %s/%s", sc.Name, lib)
			}
		}
	}
	if strings.Count(out.String(), "sold 100/100") != len(libs) {
		t.Error("the seed scenario did not sell its whole stock with every library")
	}
	if n := strings.Count(out.String(), "x faster ("); n != len(libs)-1 {
		t.Errorf("%d seed ratio rows, want one per library but the peer", n)
	}
}
