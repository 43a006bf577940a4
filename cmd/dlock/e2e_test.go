package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The end-to-end tests build the dlock binary once per package run and run it
// as a user would: as a separate process, against real redis-server processes.

var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binError error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dlock-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// dlockBinary builds the binary (with -race when the tests run with it) on
// first use.
func dlockBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binPath = filepath.Join(binDir, "dlock")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			binError = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if binError != nil {
		t.Fatal(binError)
	}
	return binPath
}

// cleanEnv is the test process's environment without DLOCK_ variables, so
// that a developer's own settings cannot leak into the tests.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "DLOCK_") {
			env = append(env, e)
		}
	}
	// A -race binary sleeps a second at exit by default; a race it finds
	// still makes it exit 66, failing the test.
	env = append(env, "GORACE=atexit_sleep_ms=0 halt_on_error=1")
	return append(env, extra...)
}

// dlockCmd prepares the binary with args and a clean environment plus env.
func dlockCmd(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(dlockBinary(t), args...)
	c.Env = cleanEnv(env...)
	return c
}

// result is how one dlock process ended.
type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d after %v\nstdout:\n%s\nstderr:\n%s", r.code, r.elapsed, r.stdout, r.stderr)
}

// runDlock runs dlock to completion (bounded by a minute) and returns its
// status and output.
func runDlock(t *testing.T, env []string, args ...string) result {
	t.Helper()
	c := dlockCmd(t, env, args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	start := time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(time.Minute, func() { _ = c.Process.Kill() })
	defer timer.Stop()
	err := c.Wait()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = exitStatus(ee.ProcessState)
	default:
		t.Fatalf("dlock %v: %v", args, err)
	}
	return r
}

// started is a dlock process running in the background.
type started struct {
	cmd       *exec.Cmd
	stdout    *lockedBuffer
	stderr    *lockedBuffer
	done      chan struct{}
	res       result
	startedAt time.Time
	waitErr   error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDlock starts dlock in the background; the test's cleanup kills it if
// it is still running.
func startDlock(t *testing.T, env []string, args ...string) *started {
	t.Helper()
	s := &started{cmd: dlockCmd(t, env, args...), stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	return startedCmd(t, s)
}

// startedCmd starts s.cmd (prepared by dlockCmd, its stdin set up if the
// test needs it) as startDlock does.
func startedCmd(t *testing.T, s *started) *started {
	t.Helper()
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	// Wait returns even if a grandchild that outlives dlock still holds the
	// output pipes.
	s.cmd.WaitDelay = time.Second
	s.startedAt = time.Now()
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		err := s.cmd.Wait()
		s.res = result{stdout: s.stdout.String(), stderr: s.stderr.String(), elapsed: time.Since(s.startedAt)}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			s.res.code = exitStatus(ee.ProcessState)
		} else if err != nil {
			s.res.code = -1
			s.waitErr = err
		}
	}()
	t.Cleanup(func() {
		// SIGTERM is forwarded to the child, which ends, and dlock releases;
		// SIGKILL only if that does not happen in time.
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// wait waits for the process to exit within d and returns how it ended.
func (s *started) wait(t *testing.T, d time.Duration) result {
	t.Helper()
	select {
	case <-s.done:
		return s.res
	case <-time.After(d):
		t.Fatalf("dlock did not exit within %v\nstdout:\n%s\nstderr:\n%s", d, s.stdout, s.stderr)
	}
	return result{}
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

// readFile returns the trimmed content of a file, "" if it does not exist.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

func execCommand(argv []string, env ...string) *exec.Cmd {
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = cleanEnv(env...)
	return c
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// killGroupOf kills the process group whose leader's pid is in pidFile: the
// children of a dlock the test killed outright.
func killGroupOf(t *testing.T, pidFile string) {
	t.Helper()
	if s := readFile(t, pidFile); s != "" {
		_ = syscall.Kill(-atoi(t, s), syscall.SIGKILL)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
