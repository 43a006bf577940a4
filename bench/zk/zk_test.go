package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"example.com/dlock/bench/internal/cmp"
	"example.com/dlock/internal/zkserver"
)

func TestMain(m *testing.M) {
	cmp.ServeChild(childEnv, runProcess) // a process of the 2x25 and seed scenarios
	os.Exit(m.Run())
}

// TestQuick runs every scenario for 300 ms (10 wake-ups) against a real
// ZooKeeper server: the program works end to end, nothing overlaps, the
// seed scenario sells exactly its stock with both libraries, every row
// counted ZooKeeper requests, and the table has a row per scenario and
// library. Skipped without java and Debian's zookeeper (fails under
// CI=true).
func TestQuick(t *testing.T) {
	zkserver.Java(t)
	var out strings.Builder
	start := time.Now()
	cfg := config{dur: 300 * time.Millisecond, only: "all", rounds: 1, wakes: 10, args: "(go test ./zk: TestQuick)"}
	if err := run(&out, cfg); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("%v\n%s", time.Since(start), out.String())
	for _, sc := range scenarios {
		for _, lib := range libNames {
			if !strings.Contains(out.String(), "| "+sc.Name+" | "+lib+" |") {
				t.Errorf("no row for %s/%s", sc.Name, lib)
			}
		}
	}
	if strings.Count(out.String(), "sold 100/100") != len(libNames) {
		t.Error("the seed scenario did not sell its whole stock with both libraries")
	}
	if strings.Contains(out.String(), "| 0.00 |") {
		t.Error("a row counted no ZooKeeper requests")
	}
}
