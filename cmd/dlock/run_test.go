package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testkit"
)

// counterScript is a read-modify-write of the counter file $F with a pause in
// the middle, so that two unprotected runs overlapping lose an update. It
// also records overlaps (mkdir is atomic) and the fence of each run.
const counterScript = `
if ! mkdir "$D/inside" 2>/dev/null; then echo overlap >> "$D/overlaps"; fi
n=$(cat "$D/counter")
sleep 0.02
echo $((n+1)) > "$D/counter"
echo "${DLOCK_FENCE:-0}" >> "$D/fences"
rmdir "$D/inside" 2>/dev/null
true`

// raceCounter runs workers × rounds increments of the counter, each in its
// own process made by mk, and returns the final counter and the number of
// overlaps seen.
func raceCounter(t *testing.T, workers, rounds int, mk func(dir string) []string) (counter, overlaps int, dir string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "counter"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, workers*rounds)
	for range workers {
		wg.Go(func() {
			for range rounds {
				argv := mk(dir)
				var r result
				if argv[0] == "dlock" {
					r = runDlock(t, []string{"D=" + dir}, argv[1:]...)
				} else {
					r = runShell(t, dir, argv)
				}
				if r.code != 0 {
					errs <- r.String()
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("a run failed: %s", e)
	}
	counter = atoi(t, readFile(t, filepath.Join(dir, "counter")))
	if o := readFile(t, filepath.Join(dir, "overlaps")); o != "" {
		overlaps = len(strings.Split(o, "\n"))
	}
	return counter, overlaps, dir
}

func TestRunSerialisesReadModifyWrite(t *testing.T) {
	srv := redisserver.Start(t)
	const workers, rounds = 2, 20
	counter, overlaps, dir := raceCounter(t, workers, rounds, func(string) []string {
		return []string{"dlock", "run", "--redis", srv.URL(), "--key", "counter", "--", "sh", "-c", counterScript}
	})
	if counter != workers*rounds || overlaps != 0 {
		t.Fatalf("under dlock run: counter %d, want %d; %d overlapping critical sections", counter, workers*rounds, overlaps)
	}
	fences := strings.Split(readFile(t, filepath.Join(dir, "fences")), "\n")
	prev := 0
	for i, f := range fences {
		n := atoi(t, f)
		if n <= prev {
			t.Fatalf("fence %d at position %d is not above the previous one %d: %v", n, i, prev, fences)
		}
		prev = n
	}
}

// The negative control: the same race without dlock must be caught.
func TestCounterRaceWithoutLockIsDetected(t *testing.T) {
	const workers, rounds = 2, 20
	counter, overlaps, _ := raceCounter(t, workers, rounds, func(string) []string {
		return []string{"sh", "-c", counterScript}
	})
	t.Logf("without a lock: counter %d of %d, %d overlaps", counter, workers*rounds, overlaps)
	if counter == workers*rounds && overlaps == 0 {
		t.Fatal("the unprotected race lost no update and never overlapped: the test cannot detect a broken lock")
	}
}

func runShell(t *testing.T, dir string, argv []string) result {
	t.Helper()
	c := execCommand(argv, "D="+dir)
	out, err := c.CombinedOutput()
	r := result{stdout: string(out)}
	if err != nil {
		r.code = 1
		r.stderr = err.Error()
	}
	return r
}

// holdScript is a child that reports its pid and readiness in files, traps
// SIGTERM (recording it, then exiting 7 unless $IGNORE is set) and otherwise
// runs until stopped.
const holdScript = `
echo $$ > "$D/pid"
if [ -n "$IGNORE" ]; then trap 'echo term >> "$D/signals"' TERM
else trap 'echo term >> "$D/signals"; exit 7' TERM; fi
echo ready > "$D/ready"
while :; do sleep 0.05; done`

func startHolder(t *testing.T, srvURL, key, dir string, env []string, flags ...string) *started {
	t.Helper()
	args := append([]string{"run", "--redis", srvURL, "--key", key}, flags...)
	args = append(args, "--", "sh", "-c", holdScript)
	s := startDlock(t, append(env, "D="+dir), args...)
	testkit.WaitFor(t, 20*time.Second, "the child to start", func() bool {
		select {
		case <-s.done:
			t.Fatalf("dlock exited early: %s", s.res)
		default:
		}
		return readFile(t, filepath.Join(dir, "ready")) == "ready"
	})
	return s
}

func processGone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

func TestRunStopsChildWhenKeyDeleted(t *testing.T) {
	srv := redisserver.Start(t)
	dir := t.TempDir()
	const ttl = 900 * time.Millisecond
	h := startHolder(t, srv.URL(), "job", dir, nil, "--lease", ttl.String())
	deleted := time.Now()
	if _, err := srv.Do("DEL", "dlock:{job}"); err != nil {
		t.Fatal(err)
	}
	r := h.wait(t, 20*time.Second)
	lag := time.Since(deleted)
	if r.code != ExitLost {
		t.Fatalf("want exit %d: %s", ExitLost, r)
	}
	// Renewal runs every ttl/3 and finds the key gone; allow a lease plus slack.
	if lag > ttl+time.Second {
		t.Errorf("the loss was acted on %v after the DEL; want within %v", lag, ttl+time.Second)
	}
	if got := readFile(t, filepath.Join(dir, "signals")); got != "term" {
		t.Errorf("the child saw signals %q, want one SIGTERM", got)
	}
	if !strings.Contains(r.stderr, "lock lost") {
		t.Errorf("stderr does not explain the loss: %s", r)
	}
	if pid := atoi(t, readFile(t, filepath.Join(dir, "pid"))); !processGone(pid) {
		t.Errorf("child %d still running", pid)
	}
}

func TestRunKillsChildIgnoringTermWhenServerDies(t *testing.T) {
	srv := redisserver.Start(t)
	dir := t.TempDir()
	const ttl, grace = 900 * time.Millisecond, 300 * time.Millisecond
	h := startHolder(t, srv.URL(), "job", dir, []string{"IGNORE=1"}, "--lease", ttl.String(), "--grace", grace.String())
	killed := time.Now()
	srv.Kill()
	r := h.wait(t, 30*time.Second)
	lag := time.Since(killed)
	if r.code != ExitLost {
		t.Fatalf("want exit %d: %s", ExitLost, r)
	}
	// The lease runs out at most one ttl after the last renewal, then the
	// child gets SIGTERM, ignores it and is killed after the grace period.
	if lag > ttl+grace+1500*time.Millisecond {
		t.Errorf("dlock exited %v after the server died; want within %v", lag, ttl+grace+1500*time.Millisecond)
	}
	if got := readFile(t, filepath.Join(dir, "signals")); !strings.HasPrefix(got, "term") {
		t.Errorf("the child saw signals %q, want SIGTERM first", got)
	}
	if pid := atoi(t, readFile(t, filepath.Join(dir, "pid"))); !processGone(pid) {
		t.Errorf("child %d still running after SIGKILL", pid)
	}
}

func TestRunWaitBound(t *testing.T) {
	srv := redisserver.Start(t)
	dir := t.TempDir()
	h := startHolder(t, srv.URL(), "busy", dir, nil)

	r := runDlock(t, nil, "run", "--redis", srv.URL(), "--key", "busy", "--wait", "400ms", "--", "true")
	if r.code != ExitNotAcquired || r.elapsed < 400*time.Millisecond {
		t.Fatalf("--wait 400ms on a held lock: want exit %d after ≥ 400ms: %s", ExitNotAcquired, r)
	}
	if !strings.Contains(r.stderr, "not acquired") {
		t.Errorf("stderr does not say why: %s", r)
	}
	r = runDlock(t, nil, "run", "--redis", srv.URL(), "--key", "busy", "--wait", "0", "--", "true")
	if r.code != ExitNotAcquired {
		t.Fatalf("--wait 0 on a held lock: want exit %d: %s", ExitNotAcquired, r)
	}

	// A signal stops an unbounded wait.
	iw := startDlock(t, nil, "run", "--redis", srv.URL(), "--key", "busy", "--", "true")
	testkit.WaitFor(t, 10*time.Second, "the waiter to subscribe", func() bool {
		n, _ := srv.Do("PUBSUB", "NUMSUB", "dlock:{busy}:released")
		return strings.HasSuffix(n, "\n1")
	})
	_ = iw.cmd.Process.Signal(syscall.SIGINT)
	if r := iw.wait(t, 10*time.Second); r.code != ExitNotAcquired || !strings.Contains(r.stderr, "interrupted") {
		t.Fatalf("SIGINT while waiting: want exit %d, interrupted: %s", ExitNotAcquired, r)
	}

	// A waiter without a bound gets the lock once the holder is done.
	w := startDlock(t, nil, "run", "--redis", srv.URL(), "--key", "busy", "--", "sh", "-c", "exit 3")
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	if r := h.wait(t, 10*time.Second); r.code != 7 {
		t.Fatalf("holder: want the child's exit 7 after SIGTERM: %s", r)
	}
	if r := w.wait(t, 10*time.Second); r.code != 3 {
		t.Fatalf("waiter: want the child's exit 3: %s", r)
	}
}

func TestRunForwardsSignals(t *testing.T) {
	srv := redisserver.Start(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			script := strings.ReplaceAll(holdScript, "TERM", strings.TrimPrefix(sigName(sig), "SIG"))
			s := startDlock(t, []string{"D=" + dir}, "run", "--redis", srv.URL(), "--key", "sig", "--", "sh", "-c", script)
			testkit.WaitFor(t, 20*time.Second, "the child to start", func() bool { return readFile(t, filepath.Join(dir, "ready")) == "ready" })
			if err := s.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			r := s.wait(t, 10*time.Second)
			if r.code != 7 || readFile(t, filepath.Join(dir, "signals")) != "term" {
				t.Fatalf("want the child to trap %v and exit 7: %s", sig, r)
			}
			if held, err := lockHeld(srv, "dlock:{sig}"); err != nil || held {
				t.Fatalf("lock still held after the child exited: %v %v", held, err)
			}
		})
	}
}

func sigName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return strconv.Itoa(int(s))
}

func TestRunChildEnvironmentAndNoTokenInOutput(t *testing.T) {
	srv := redisserver.Start(t)
	dir := t.TempDir()
	script := `printf '%s\n%s\n%s\n' "$DLOCK_KEY" "$DLOCK_FENCE" "$DLOCK_TOKEN" > "$D/env"`
	var last string
	var lastFence uint64
	for i := 1; i <= 2; i++ {
		r := runDlock(t, []string{"D=" + dir}, "run", "-v", "--redis", srv.URL(), "--key", "env:k", "--", "sh", "-c", script)
		if r.code != 0 {
			t.Fatal(r)
		}
		lines := strings.Split(readFile(t, filepath.Join(dir, "env")), "\n")
		fence, err := strconv.ParseUint(lines[min(1, len(lines)-1)], 10, 64)
		if len(lines) != 3 || lines[0] != "env:k" || err != nil || fence <= lastFence || len(lines[2]) < 16 {
			t.Fatalf("run %d: child environment %q; want key env:k, a fence above %d and a token", i, lines, lastFence)
		}
		lastFence = fence
		tok := lines[2]
		if tok == last {
			t.Fatalf("two runs got the same token")
		}
		last = tok
		if strings.Contains(r.stdout+r.stderr, tok) || strings.Contains(r.stdout+r.stderr, tok[:8]) {
			t.Fatalf("dlock printed the token: %s", r)
		}
		if !strings.Contains(r.stderr, fmt.Sprintf("fence %d", fence)) {
			t.Errorf("-v does not report the fence: %s", r)
		}
	}
}

// If dlock run itself is killed, the lock will expire while the command runs
// on; on Linux the kernel kills the command at once instead.
func TestRunChildDiesWithDlock(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux-only")
	}
	srv := redisserver.Start(t)
	dir := t.TempDir()
	h := startHolder(t, srv.URL(), "orphan", dir, []string{"IGNORE=1"})
	pid := atoi(t, readFile(t, filepath.Join(dir, "pid")))
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	_ = h.cmd.Process.Kill()
	h.wait(t, 10*time.Second)
	testkit.WaitFor(t, 5*time.Second, "the child to die with dlock", func() bool { return processGone(pid) })
}

// On a terminal the command gets the foreground: it can read the terminal
// (in a background group it would be stopped by SIGTTIN and hang) and gets
// the terminal's Ctrl-C. script(1) provides the terminal.
func TestRunInteractiveCommandOwnsTerminal(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil || runtime.GOOS != "linux" {
		t.Skip("needs Linux and script(1) from util-linux")
	}
	srv := redisserver.Start(t)
	bin := dlockBinary(t)
	child := `read line; echo "read:$line"; trap 'echo interrupted; exit 9' INT; echo waiting; while :; do sleep 0.05; done`
	inner := fmt.Sprintf("%s run --redis %s --key tty -- sh -c '%s'", bin, srv.URL(), strings.ReplaceAll(child, "'", `'\''`))
	c := exec.Command(scriptBin, "-qec", inner, "/dev/null")
	c.Env = cleanEnv()
	stdin, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	c.Stdout, c.Stderr = out, out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = c.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = c.Process.Kill()
		<-done
	})
	testkit.WaitFor(t, 20*time.Second, "the lock to be held", func() bool {
		held, _ := lockHeld(srv, "dlock:{tty}")
		return held
	})
	_, _ = io.WriteString(stdin, "hello\n")
	testkit.WaitFor(t, 10*time.Second, "the command to read the terminal", func() bool { return strings.Contains(out.String(), "waiting") })
	_, _ = io.WriteString(stdin, "\x03") // Ctrl-C
	select {
	case <-done:
		err = waitErr
	case <-time.After(10 * time.Second):
		t.Fatalf("no exit after Ctrl-C; output:\n%s", out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 9 || !strings.Contains(out.String(), "read:hello") || !strings.Contains(out.String(), "interrupted") {
		t.Fatalf("want the command to read the line, trap Ctrl-C and exit 9; got %v, output:\n%s", err, out)
	}
	if held, err := lockHeld(srv, "dlock:{tty}"); err != nil || held {
		t.Fatalf("lock not released: %v", err)
	}
}

// lockHeld reports whether redisstore's lock key is held: its value is
// "<holds>:<fence>:<call id>:<owner>", and a released lock stays a while as
// a tombstone with holds 0.
func lockHeld(srv *redisserver.Server, key string) (bool, error) {
	v, err := srv.Do("GET", key)
	if errors.Is(err, redisserver.ErrNil) {
		return false, nil
	}
	return err == nil && !strings.HasPrefix(v, "0:"), err
}
