package main

// Regression tests of issue 13's CLI items (A2, A4, A5, A6, A7, L6), each
// run through the built binary against real redis-server processes.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/cmd/dlock/internal/inventory"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"
)

// A2: --lease is the renewed lease; the old --ttl (which meant the same and
// clashed with the library's fixed WithTTL) is refused, naming --lease, and
// the command does not run.
func TestA2RunLeaseRenewsAndOldTTLIsRefused(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	r := runDlock(t, []string{"F=" + ran}, "run", "--key", "k", "--ttl", "6s", "--", "sh", "-c", `touch "$F"`)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "--lease 6s") || fileExists(ran) {
		t.Fatalf("run --ttl 6s: want exit %d naming --lease and no command run: %s", ExitUsage, r)
	}
	if r := runDlock(t, nil, "run", "--help"); !strings.Contains(r.stdout, "--lease") || strings.Contains(r.stdout, "--ttl ") {
		t.Fatalf("run --help must show --lease and not --ttl: %s", r)
	}

	// A job four leases long keeps its lock: the lease is renewed.
	srv := redisserver.Start(t)
	r = runDlock(t, []string{"F=" + ran}, "run", "--redis", srv.URL(), "--key", "long", "--lease", "300ms", "--",
		"sh", "-c", `sleep 1.2; touch "$F"`)
	if r.code != 0 || !fileExists(ran) {
		t.Fatalf("run --lease 300ms with a 1.2 s job: want exit 0, the job done: %s", r)
	}
}

// A4: bench against an unreachable store exits 69 without a result line;
// --version works like `dlock version`.
func TestA4BenchUnreachableExits69AndVersionFlag(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", closedPort(t))
	r := runDlock(t, nil, "bench", "--redis", "redis://"+addr, "--duration", "200ms")
	if r.code != ExitUnavailable || strings.Contains(r.stdout, "ops/s") || !strings.Contains(r.stderr, "cannot reach redis "+addr) {
		t.Fatalf("bench against a closed port: want exit %d and no ops/s line: %s", ExitUnavailable, r)
	}
	v := runDlock(t, nil, "version")
	f := runDlock(t, nil, "--version")
	if v.code != 0 || f.code != 0 || f.stdout != v.stdout || !strings.HasPrefix(f.stdout, "dlock ") {
		t.Fatalf("--version must print what `dlock version` prints:\n%s\n%s", f, v)
	}
	// Negative control: bench against a live server prints its lines.
	srv := redisserver.Start(t)
	if r := runDlock(t, nil, "bench", "--redis", srv.URL(), "--duration", "100ms", "--goroutines", "4"); r.code != 0 || strings.Count(r.stdout, "ops/s") != 2 {
		t.Fatalf("bench against a live server: %s", r)
	}
}

// A4 (docs): every subcommand has a section in docs/cli.md (demo and
// inventory in docs/demo.md), and every exit code is in its table.
func TestA4EverySubcommandAndExitCodeIsDocumented(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cli, demo := read("../../docs/cli.md"), read("../../docs/demo.md")
	for _, c := range newRootCmd(nil, nil).Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if !strings.Contains(cli, "## `dlock "+c.Name()) && !strings.Contains(demo, "dlock "+c.Name()) {
			t.Errorf("subcommand %s has no section in docs/cli.md", c.Name())
		}
	}
	for _, code := range []int{ExitUsage, ExitUnavailable, ExitNotAcquired, ExitLost, ExitRefused, ExitUnsafe} {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^\| %d \|`, code)).MatchString(cli) {
			t.Errorf("exit code %d is not in docs/cli.md's table", code)
		}
	}
	if !regexp.MustCompile("(?m)^\\| 76 \\|.*bench").MatchString(cli) {
		t.Error("docs/cli.md: exit 76 does not mention bench")
	}
}

// A5: a Redlock node that refuses connections gets one FAIL line, not "OK
// acl … may run every command" nor "allow INFO for this user".
func TestA5DoctorOnNodeRefusingConnections(t *testing.T) {
	a, b := redisserver.Start(t), redisserver.Start(t)
	down := fmt.Sprintf("127.0.0.1:%d", closedPort(t))
	r := runDlock(t, nil, "doctor", "--json", "--redlock", a.URL()+","+b.URL()+",redis://"+down)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v: %s", err, r)
	}
	if r.code != ExitUnsafe || rep.Safe {
		t.Fatalf("a node down: want exit %d, unsafe: %s", ExitUnsafe, r)
	}
	// Each node's checks are named "ADDR/CHECK".
	perNode := map[string][]check{}
	for _, c := range rep.Checks {
		if node, name, ok := strings.Cut(c.Name, "/"); ok && strings.HasPrefix(node, "127.0.0.1:") {
			c.Name = name
			perNode[node] = append(perNode[node], c)
		}
	}
	for _, live := range []string{a.Addr(), b.Addr()} {
		if n := len(perNode[live]); n < 5 { // negative control: live nodes get every check
			t.Errorf("live node %s: only %d checks: %+v", live, n, rep.Checks)
		}
	}
	cs := perNode[down]
	if len(cs) != 1 || cs[0].Name != "connection" || cs[0].Status != statusFail {
		t.Fatalf("down node %s: want one FAIL connection check, got %+v in %+v", down, cs, rep.Checks)
	}
}

// A6: the CLI's own messages: remaining lease named and rounded, one
// "dlock:" per line, bare host:port, bad port and WRONGPASS told apart from
// "cannot reach", and the environment variable behind a conflict named.
func TestA6ErrorMessages(t *testing.T) {
	srv := redisserver.Start(t)
	holdKey(t, srv.URL(), "busy")
	rounded := regexp.MustCompile(`held by another owner \(remaining lease \d+(\.\d{1,2})?s\)`)
	for _, wait := range []string{"0", "300ms"} {
		r := runDlock(t, nil, "run", "--redis", srv.URL(), "--key", "busy", "--wait", wait, "--", "true")
		if r.code != ExitNotAcquired || !rounded.MatchString(r.stderr) {
			t.Errorf("--wait %s on a held key: want exit %d and a rounded remaining lease: %s", wait, ExitNotAcquired, r)
		}
		for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			if strings.Count(line, "dlock:") > 1 {
				t.Errorf("stacked prefixes: %q", line)
			}
		}
	}
	if r := runDlock(t, nil, "status", "--redis", srv.Addr(), "busy"); r.code != 0 || !strings.Contains(r.stdout, "held:     yes") {
		t.Errorf("a bare host:port must work as redis://host:port: %s", r)
	}
	if r := runDlock(t, nil, "status", "--redis", "redis://127.0.0.1:99999", "k"); r.code != ExitUsage || !strings.Contains(r.stderr, "1-65535") {
		t.Errorf("port 99999: want usage exit %d: %s", ExitUsage, r)
	}
	if r := runDlock(t, nil, "status", "--redis", "redis://nobody:wrong@"+srv.Addr(), "k"); r.code != ExitRefused ||
		!strings.Contains(r.stderr, "WRONGPASS") || strings.Contains(r.stderr, "cannot reach") {
		t.Errorf("WRONGPASS: want exit %d, not \"cannot reach\": %s", ExitRefused, r)
	}
	r := runDlock(t, []string{"DLOCK_REDIS_CLUSTER=redis://127.0.0.1:1"}, "status", "--redis", srv.URL(), "k")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "DLOCK_REDIS_CLUSTER") {
		t.Errorf("conflict from the environment: want exit %d naming DLOCK_REDIS_CLUSTER: %s", ExitUsage, r)
	}
}

// A7: a key holding a value that is not a lock is not "held: no" in status
// (run reports it as held by another owner). Needs redisstore's Inspect to
// report such a value as dlock.ErrRefused (the redis helper's part of issue
// 13): skipped, saying so, where that has not landed yet.
func TestA7StatusOfNonLockValue(t *testing.T) {
	srv := redisserver.Start(t)
	if _, err := srv.Do("SET", "dlock:{weird}", "hello"); err != nil {
		t.Fatal(err)
	}
	if r := runDlock(t, nil, "run", "--redis", srv.URL(), "--key", "weird", "--wait", "0", "--", "true"); r.code == 0 {
		t.Fatalf("run on a non-lock value must not acquire: %s", r)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	st, err := redisstore.New(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Inspect(context.Background(), "weird"); !errors.Is(err, dlock.ErrRefused) {
		t.Fatalf("redisstore.Inspect of a non-lock value returned %v, want an error matching dlock.ErrRefused", err)
	}
	r := runDlock(t, nil, "status", "--redis", srv.URL(), "weird")
	if r.code != ExitRefused || strings.Contains(r.stdout, "held:     no") || !strings.Contains(r.stderr, "not a dlock lock") {
		t.Fatalf("status of a non-lock value: want exit %d saying it is not a lock: %s", ExitRefused, r)
	}
}

// L6: without --wait, a user lacking EVALSHA ends at once with the refused
// exit code instead of retrying forever in silence: the store reports
// NOPERM as dlock.ErrRefused, and run ends on it.
func TestL6RunRefusedByACLExitsAtOnce(t *testing.T) {
	srv := redisserver.Start(t)
	rules := append([]string{}, lockerRules...)
	setUser(t, srv, "noevalsha", append(rules, "-evalsha")...)
	url := "redis://noevalsha:pw@" + srv.Addr()

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "noevalsha", Password: "pw"})
	defer rdb.Close()
	st, err := redisstore.New(rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := dlock.New(st)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	if _, err := c.TryLock(context.Background(), "probe"); !errors.Is(err, dlock.ErrRefused) {
		t.Fatalf("TryLock as a user without EVALSHA returned %v, want an error matching dlock.ErrRefused", err)
	}
	s := startDlock(t, nil, "run", "--redis", url, "--key", "acl", "--", "true")
	r := s.wait(t, 20*time.Second)
	if r.code != ExitRefused || !strings.Contains(r.stderr, "refused") {
		t.Fatalf("run without EVALSHA: want exit %d at once with a message: %s", ExitRefused, r)
	}
}

// L6: with --wait, run waits for an unreachable store within the bound and
// says so on stderr; without --wait it exits 69 at once (negative control:
// no "still trying" line there).
func TestL6RunSaysItWaitsForUnreachableStore(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", closedPort(t))
	const wait = 5 * time.Second
	r := runDlock(t, nil, "run", "--redis", "redis://"+addr, "--key", "k", "--wait", wait.String(), "--", "true")
	if r.code != ExitUnavailable || !strings.Contains(r.stderr, "waiting for it (--wait 5s)") ||
		!strings.Contains(r.stderr, "still trying until --wait 5s runs out") {
		t.Fatalf("--wait 5s on a closed port: want exit %d and the waiting lines on stderr: %s", ExitUnavailable, r)
	}
	// Slack: process start-up, and go-redis's dial retries of the last try.
	if r.elapsed < wait || r.elapsed > wait+5*time.Second {
		t.Fatalf("--wait 5s ended after %v, want within [5s, 10s]: %s", r.elapsed, r)
	}
	r = runDlock(t, nil, "run", "--redis", "redis://"+addr, "--key", "k", "--", "true")
	if r.code != ExitUnavailable || strings.Contains(r.stderr, "still trying") {
		t.Fatalf("no --wait on a closed port: want exit %d at once: %s", ExitUnavailable, r)
	}
}

// readRepoFile returns a file of the repository, relative to its root.
func readRepoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A2 (docs) and A8: the docs say what is so. No README example takes a
// fixed lease (dlock.WithTTL) where a long job would lose its lock; no store
// that does not exist; an install line that can work; no missing DESIGN.md;
// the strategy count; what test.sh installs; every strategy in `inventory
// serve --help`.
func TestA8DocsSayWhatIsSo(t *testing.T) {
	readme, docGo := readRepoFile(t, "README.md"), readRepoFile(t, "doc.go")
	cli, demo := readRepoFile(t, "docs/cli.md"), readRepoFile(t, "docs/demo.md")
	for _, c := range []struct {
		doc, text, what string
		want            bool
	}{
		{readme, "dlock.WithTTL(", "README: an example with a fixed lease (WithTTL)", false},
		{readme, "dlock.WithAutoRenew(", "README: the renewed lease in More control", true},
		{readme, "dlock.LeaseFromContext(ctx)", "README: how Do's function gets the fence", true},
		{readme, "locks.Close(", "README: the Client's Close in the Quick start", true},
		{readme, "chromium", "README: what test.sh installs", true},
		{readme, "go doc -all example.com/dlock`) run", "README: examples claimed in go doc", false},
		{docGo, "example.com/dlock/zkstore", "doc.go: the ZooKeeper store, which exists since issue 15", true},
		{docGo, "SQL databases", "doc.go: an SQL store", false},
		{cli, "go install example.com/dlock/cmd/dlock@latest", "docs/cli.md: go install @latest", false},
		{cli, "go install ./cmd/dlock", "docs/cli.md: install from a clone", true},
		{demo, "DESIGN.md", "docs/demo.md: a DESIGN.md not in the repository", false},
		{demo, "all nine", "docs/demo.md: nine strategies", false},
		{demo, "(default: all ten)", "docs/demo.md: the strategy count", true},
	} {
		if strings.Contains(c.doc, c.text) != c.want {
			t.Errorf("%s: contains %q = %v, want %v", c.what, c.text, !c.want, c.want)
		}
	}
	if n := len(inventory.Strategies); n != 10 {
		t.Errorf("%d strategies: docs/demo.md says ten", n)
	}
	r := runDlock(t, nil, "inventory", "serve", "--help")
	for _, s := range inventory.Strategies {
		if !strings.Contains(r.stdout, " "+s+" ") && !strings.Contains(r.stdout, " "+s+"\n") {
			t.Errorf("inventory serve --help omits %s:\n%s", s, r.stdout)
		}
	}
}
