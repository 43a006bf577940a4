package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/dlock/bench/internal/cmp"

	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/pgserver"
)

func TestMain(m *testing.M) {
	cmp.ServeChild(childEnv, runProcess) // a process of the 2x25 and seed scenarios
	os.Exit(m.Run())
}

// requireServers skips the test when PostgreSQL or MariaDB is not
// installed (fails under CI=true).
func requireServers(t *testing.T) {
	t.Helper()
	if pgserver.Find("postgres") == "" || !mysqlserver.Available() {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and no postgres or mariadbd: install Debian's postgresql and mariadb-server")
		}
		t.Skip("needs Debian's postgresql and mariadb-server")
	}
}

// TestQuick runs every scenario briefly with every library on both
// databases (servers started by the program): it works end to end, no
// critical section overlaps another, the seed scenario never oversells
// (stock left = 100 - sold), dlock and the polling table sell the whole
// stock, and the tables have a row per scenario and library.
func TestQuick(t *testing.T) {
	requireServers(t)
	if testing.Short() {
		t.Skip("starts two database servers")
	}
	var out strings.Builder
	start := time.Now()
	err := run(&out, options{dbs: []string{dbPG, dbMySQL}, dur: 300 * time.Millisecond, cap: 3 * time.Second,
		only: "all", libs: "all", rounds: 1, samples: 5, args: "(go test ./sql: TestQuick)"})
	t.Logf("%v\n%s", time.Since(start), out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, db := range []string{dbPG, dbMySQL} {
		for _, sc := range scenarios {
			for _, lib := range libsOf[db] {
				if !strings.Contains(out.String(), "| "+sc.Name+" | "+lib+" | 1 |") {
					t.Errorf("%s: no row for %s/%s", db, sc.Name, lib)
				}
			}
		}
	}
	seeds := regexp.MustCompile(`\| seed-2x50 \| (\w+) \|.*sold (\d+)/100 .*stock left (-?\d+), oversold (\w+), (\d+) overlaps`).FindAllStringSubmatch(out.String(), -1)
	if len(seeds) != len(libsOf[dbPG])+len(libsOf[dbMySQL]) {
		t.Fatalf("%d seed rows", len(seeds))
	}
	for _, m := range seeds {
		sold, _ := strconv.Atoi(m[2])
		left, _ := strconv.Atoi(m[3])
		if left != 100-sold || m[4] != "false" || m[5] != "0" {
			t.Errorf("%s: sold %d, left %d, oversold %s, overlaps %s", m[1], sold, left, m[4], m[5])
		}
		if m[1] != "pglock" && sold != 100 { // pglock's waiters sleep 2 s: the 3 s cap cuts it short
			t.Errorf("%s sold %d/100", m[1], sold)
		}
	}
	if n := strings.Count(out.String(), " 0 overlaps"); n != 2*len(scenarios)+3*len(scenarios) {
		t.Errorf("%d rows with 0 overlaps, want every row", n)
	}
}

// TestNoLockIsCaught is the negative control: with no lock ("none") the
// same program must see critical sections overlap and the stock oversold,
// and fail.
func TestNoLockIsCaught(t *testing.T) {
	requireServers(t)
	var out strings.Builder
	err := run(&out, options{dbs: []string{dbPG}, dur: 300 * time.Millisecond, cap: 3 * time.Second,
		only: "onekey-50,seed-2x50", libs: "none", rounds: 1, samples: 5, args: "(go test ./sql: TestNoLockIsCaught)"})
	t.Logf("%s", out.String())
	if err == nil {
		t.Fatal("no lock, and the run did not fail")
	}
	rows := regexp.MustCompile(`\| (onekey-50|seed-2x50) \| none \|.* (\d+) overlaps`).FindAllStringSubmatch(out.String(), -1)
	if len(rows) != 2 {
		t.Fatalf("%d rows for none", len(rows))
	}
	if rows[0][2] == "0" {
		t.Error("onekey-50 without a lock: 0 overlaps")
	}
	if !strings.Contains(out.String(), "oversold true") {
		t.Error("seed without a lock: not oversold")
	}
}
