package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
)

// groupScript is a command whose background child (the grandchild of run)
// ignores SIGTERM, SIGINT and SIGHUP and records its pid in $D/gpid; the
// command itself waits for it and dies of SIGTERM.
const groupScript = `
sh -c 'trap "" TERM INT HUP; echo $$ > "$D/gpid.tmp"; mv "$D/gpid.tmp" "$D/gpid"; exec sleep 600' &
wait`

// startGroup starts run with groupScript and returns it with the
// grandchild's pid, once that is known and alive.
func startGroup(t *testing.T, srv *redisserver.Server, key, dir string) (*started, int) {
	t.Helper()
	s := startDlock(t, []string{"D=" + dir}, "run", "--redis", srv.URL(), "--key", key,
		"--lease", "900ms", "--grace", "300ms", "--", "sh", "-c", groupScript)
	testkit.WaitFor(t, 20*time.Second, "the grandchild to start", func() bool {
		return readFile(t, filepath.Join(dir, "gpid")) != ""
	})
	pid := atoi(t, readFile(t, filepath.Join(dir, "gpid")))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	// The check below can fail: the grandchild runs, and ignored SIGTERM.
	if processGone(pid) {
		t.Fatalf("grandchild %d is not running", pid)
	}
	return s, pid
}

// A grandchild that ignores the signal must not outlive the lock: after an
// interruption it gets SIGKILL after --grace, before run releases and exits.
func TestRunKillsGrandchildIgnoringTermAfterInterrupt(t *testing.T) {
	srv := redisserver.Start(t)
	dir := t.TempDir()
	s, pid := startGroup(t, srv, "group:int", dir)
	signalled := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := s.wait(t, 15*time.Second)
	if !processGone(pid) {
		t.Fatalf("grandchild %d ignoring SIGTERM outlived dlock run (%s)", pid, r)
	}
	if r.code != 128+int(syscall.SIGTERM) {
		t.Errorf("want the command's status %d (killed by SIGTERM): %s", 128+int(syscall.SIGTERM), r)
	}
	if took := time.Since(signalled); took < 300*time.Millisecond {
		t.Errorf("run exited %v after the signal, before --grace 300ms: the grandchild got no grace", took)
	}
	if held, err := lockHeld(srv, "dlock:{group:int}"); err != nil || held {
		t.Fatalf("lock still held after run exited: %v %v", held, err)
	}
}

// After a loss the whole group is killed at once, grandchild included,
// before run exits with 76.
func TestRunKillsGrandchildIgnoringTermAfterLoss(t *testing.T) {
	srv := redisserver.Start(t)
	dir := t.TempDir()
	s, pid := startGroup(t, srv, "group:lost", dir)
	if _, err := srv.Do("DEL", "dlock:{group:lost}"); err != nil {
		t.Fatal(err)
	}
	r := s.wait(t, 15*time.Second)
	if r.code != ExitLost {
		t.Fatalf("want exit %d: %s", ExitLost, r)
	}
	if !processGone(pid) {
		t.Fatalf("grandchild %d ignoring SIGTERM outlived the lost lock and dlock run (%s)", pid, r)
	}
}

// What a command leaves running when it exits on its own is left alone (as
// documented): only an interrupted or lost command's group is stopped.
func TestRunLeavesBackgroundOfNormalExit(t *testing.T) {
	srv := redisserver.Start(t)
	dir := t.TempDir()
	r := runDlock(t, []string{"D=" + dir}, "run", "--redis", srv.URL(), "--key", "group:normal", "--",
		"sh", "-c", `sleep 600 >/dev/null 2>&1 & echo $! > "$D/bg"`)
	pid := atoi(t, readFile(t, filepath.Join(dir, "bg")))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if r.code != 0 || processGone(pid) {
		t.Fatalf("background process %d of a command that exited 0 is gone, or run failed: %s", pid, r)
	}
}

// run --json after a loss: the outcome says so, with the command's status
// and a failed release, as the last line on stderr.
func TestRunJSONReportsLoss(t *testing.T) {
	srv := redisserver.Start(t)
	dir := t.TempDir()
	h := startHolder(t, srv.URL(), "json:lost", dir, nil, "--json", "--lease", "900ms")
	if _, err := srv.Do("DEL", "dlock:{json:lost}"); err != nil {
		t.Fatal(err)
	}
	r := h.wait(t, 20*time.Second)
	line := lastLine(r.stderr)
	checkJSON(t, jsonDocs(t)["run"], line)
	var o runOutcome
	if err := json.Unmarshal([]byte(line), &o); err != nil || r.code != ExitLost || o.Outcome != outcomeLost || o.ExitCode != ExitLost ||
		!o.Acquired || o.Fence == 0 || o.CommandStatus == nil || *o.CommandStatus != 7 || o.Released == nil || *o.Released || o.Error == "" {
		t.Fatalf("want outcome lost, exit 76, the child's status 7, released false: %v\n%s", err, r)
	}
}

// --json-fd 3: the object goes to descriptor 3 and nowhere else, and the
// command does not inherit the descriptor.
func TestRunJSONFDThroughBinary(t *testing.T) {
	srv := redisserver.Start(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := dlockCmd(t, nil, "run", "--json", "--json-fd", "3", "--redis", srv.URL(), "json:fd3", "--",
		"sh", "-c", `if [ -e /proc/$$/fd/3 ]; then echo inherited; else echo closed; fi`)
	c.ExtraFiles = []*os.File{w}
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	err = c.Run()
	_ = w.Close()
	got, _ := io.ReadAll(r)
	var o runOutcome
	if err != nil || json.Unmarshal(got, &o) != nil || o.Outcome != outcomeExited || o.Key != "json:fd3" || stderr.String() != "" {
		t.Fatalf("run --json-fd 3: %v; fd 3 %q, stderr %q", err, got, stderr.String())
	}
	if stdout.String() != "closed\n" {
		t.Errorf("the command saw descriptor 3: %q", stdout.String())
	}
}
