package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/pgserver"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
)

// nextFence takes key with run --json and returns the fence it got.
func nextFence(t *testing.T, store, key string) uint64 {
	t.Helper()
	r := runDlock(t, nil, "run", "--json", "--store", store, "--key", key, "--", "true")
	var out struct{ Fence uint64 }
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n") // --json goes to stderr, as its last line
	if r.code != 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &out) != nil || out.Fence == 0 {
		t.Fatalf("run --json: %s", r)
	}
	return out.Fence
}

// checkBreaksRun: release --force --yes of the key a `dlock run` holds
// prints the ended holding (holder as status shows it, fence), the run
// sees the loss as taken at its next renewal (exit 76 within within), and
// the next holder's fence is greater.
func checkBreaksRun(t *testing.T, store string, run *started, within time.Duration) {
	t.Helper()
	before := statusJSON(t, store, "job")
	if !before.Held {
		t.Fatalf("status before the break: %+v; want held", before)
	}
	r := runDlock(t, nil, "release", "--force", "--yes", "--store", store, "job")
	want := []string{"released: yes", "holder:   " + before.holderText(), "fence:    " + itoa(int(before.Fence))}
	for _, w := range want {
		if r.code != 0 || !strings.Contains(r.stdout, w) {
			t.Fatalf("release --force --yes: want exit 0 and %q: %s", w, r)
		}
	}
	broken := time.Now()
	res := run.wait(t, within+10*time.Second)
	if res.code != ExitLost || !strings.Contains(res.stderr, "taken by another owner") {
		t.Fatalf("run after the break: want exit %d, lost as taken: %s", ExitLost, res)
	}
	if lag := time.Since(broken); lag > within {
		t.Errorf("run acted on the break %v after it; want within %v", lag, within)
	}
	if f := nextFence(t, store, "job"); f <= before.Fence {
		t.Fatalf("fence after the break = %d; want greater than the broken holding's %d", f, before.Fence)
	}
}

func TestReleaseForceEndsRunOnRedis(t *testing.T) {
	srv := redisserver.Start(t)
	const ttl = 900 * time.Millisecond
	h := startHolder(t, srv.URL(), "job", t.TempDir(), nil, "--lease", ttl.String())
	checkBreaksRun(t, srv.URL(), h, ttl+2*time.Second) // renewal every ttl/3, plus slack
}

func TestReleaseForceEndsRunOnEtcd(t *testing.T) {
	url, _ := etcdStore(t)
	url += "?session-ttl=2s"
	dir := t.TempDir()
	h := startDlock(t, []string{"D=" + dir}, "run", "--store", url, "--key", "job", "--", "sh", "-c", holdScript)
	testkit.WaitFor(t, 20*time.Second, "the child to start", func() bool { return readFile(t, filepath.Join(dir, "ready")) == "ready" })
	checkBreaksRun(t, url, h, 2*time.Second+2*time.Second) // renewal within the session TTL, plus slack
}

func TestReleaseForceEndsRunOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary against a real PostgreSQL")
	}
	checkBreaksSQLRun(t, pgserver.Start(t).URL())
}

func TestReleaseForceEndsRunOnMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary against a real MariaDB")
	}
	checkBreaksSQLRun(t, mysqlserver.Start(t).URL())
}

// checkBreaksSQLRun is checkBreaksRun on an SQL store's lease table, after
// applying its schema.
func checkBreaksSQLRun(t *testing.T, store string) {
	t.Helper()
	if r := runDlock(t, nil, "schema", "--apply", "--store", store); r.code != 0 {
		t.Fatalf("schema --apply: %s", r)
	}
	const ttl = 900 * time.Millisecond
	dir := t.TempDir()
	h := startDlock(t, []string{"D=" + dir}, "run", "--store", store, "--key", "job", "--lease", ttl.String(), "--", "sh", "-c", holdScript)
	testkit.WaitFor(t, 20*time.Second, "the child to start", func() bool { return readFile(t, filepath.Join(dir, "ready")) == "ready" })
	checkBreaksRun(t, store, h, ttl+2*time.Second)
}

// Without --yes and without a terminal, release --force refuses with 64
// and one line, before touching the store: the key stays held. The control
// is the --yes run of the same key, which breaks it.
func TestReleaseForceWithoutTerminalNeedsYes(t *testing.T) {
	srv := redisserver.Start(t)
	h := startHolder(t, srv.URL(), "job", t.TempDir(), nil, "--lease", "900ms")
	r := runDlock(t, nil, "release", "--force", "--store", srv.URL(), "job")
	if r.code != ExitUsage || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "--yes") || r.stdout != "" {
		t.Fatalf("release --force without a terminal: want exit 64 and one line naming --yes: %s", r)
	}
	if s := statusJSON(t, srv.URL(), "job"); !s.Held {
		t.Fatalf("the key was changed by a refused release: %+v", s)
	}
	if r := runDlock(t, nil, "release", "--force", "--yes", "--store", srv.URL(), "job"); r.code != 0 {
		t.Fatalf("control: release --force --yes: %s", r)
	}
	if r := h.wait(t, 10*time.Second); r.code != ExitLost {
		t.Fatalf("run after the control's break: %s", r)
	}
}

// A free key: exit 0, "not held", released false in JSON, nothing changed
// (the last fence stays). release without --force is a usage error.
func TestReleaseForceOfFreeKey(t *testing.T) {
	srv := redisserver.Start(t)
	f := nextFence(t, srv.URL(), "free")
	r := runDlock(t, nil, "release", "--force", "--yes", "--store", srv.URL(), "free")
	if r.code != 0 || !strings.Contains(r.stdout, "released: no (not held; nothing changed)") {
		t.Fatalf("release --force of a free key: %s", r)
	}
	r = runDlock(t, nil, "release", "--force", "--yes", "--json", "--store", srv.URL(), "free")
	var out releaseResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.Released || out.Ended != nil || out.Key != "free" {
		t.Fatalf("release --force --json of a free key: %s", r)
	}
	if s := statusJSON(t, srv.URL(), "free"); s.Held || s.Fence != f {
		t.Fatalf("status after releasing a free key: %+v; want free with fence %d", s, f)
	}
	if r := runDlock(t, nil, "release", "--yes", "--store", srv.URL(), "free"); r.code != ExitUsage || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("release without --force: want exit 64 naming --force: %s", r)
	}
}

// On a terminal, release --force shows the holder and asks: "n" changes
// nothing (exit 64), "y" breaks the lock. script(1) provides the terminal.
func TestReleaseForceAsksOnTerminal(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil || runtime.GOOS != "linux" {
		t.Skip("needs Linux and script(1) from util-linux")
	}
	srv := redisserver.Start(t)
	h := startHolder(t, srv.URL(), "job", t.TempDir(), nil, "--lease", "900ms")
	holder := statusJSON(t, srv.URL(), "job").holderText()
	for _, answer := range []string{"n", "y"} {
		inner := fmt.Sprintf("%s release --force --store %s job", dlockBinary(t), srv.URL())
		c := exec.Command(scriptBin, "-qec", inner, "/dev/null")
		c.Env = cleanEnv()
		c.Stdin = strings.NewReader(answer + "\n")
		out, err := c.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if !strings.Contains(string(out), "held by "+holder) || !strings.Contains(string(out), "[y/N]") {
			t.Fatalf("answer %s: the question does not show the holder %s:\n%s", answer, holder, out)
		}
		held := statusJSON(t, srv.URL(), "job").Held
		switch {
		case answer == "n" && (code != ExitUsage || !held):
			t.Fatalf("answer n: want exit 64 and the key still held; exit %d, held %v:\n%s", code, held, out)
		case answer == "y" && (code != 0 || !strings.Contains(string(out), "released: yes")):
			t.Fatalf("answer y: want exit 0 and the lock released; exit %d:\n%s", code, out)
		}
	}
	if r := h.wait(t, 10*time.Second); r.code != ExitLost {
		t.Fatalf("run after the confirmed break: %s", r)
	}
}

// release --json against docs/cli.md's table, for a held and a free key;
// a store without driver.Breaker is a usage error (64) that names it.
func TestReleaseJSONMatchesDocs(t *testing.T) {
	docs := jsonDocs(t)
	if len(docs["release"]) == 0 {
		t.Fatal("docs/cli.md documents no fields of release --json")
	}
	l := holdMem(t, "json:break")
	code, out, stderr := runCLI(t, "release", "--force", "--yes", "--json", "--store", "mem://full", "json:break")
	seen := checkJSON(t, docs["release"], out)
	var res releaseResult
	_ = json.Unmarshal([]byte(out), &res)
	if code != 0 || !res.Released || !seen["ended.fence"] || res.Ended.Fence != l.Fence() || res.Ended.Holder != abbrev(l.Token()) {
		t.Fatalf("release --json of a held key: exit %d, want the ended holding of fence %d: %s %s", code, l.Fence(), out, stderr)
	}
	code, out, _ = runCLI(t, "release", "--force", "--yes", "--json", "--store", "mem://full", "json:break")
	if seen := checkJSON(t, docs["release"], out); code != 0 || seen["ended"] || seen["not_a_lock"] {
		t.Fatalf("release --json of a free key: exit %d %s", code, out)
	}
	code, _, stderr = runCLI(t, "release", "--force", "--yes", "--store", "mem://bare", "json:break")
	if code != ExitUsage || !strings.Contains(stderr, "cannot break locks") {
		t.Fatalf("release on a store without driver.Breaker: exit %d %s", code, stderr)
	}
}
