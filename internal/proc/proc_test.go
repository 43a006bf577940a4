package proc

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: bad or repeated %d", ports, p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}

// startWithChild starts sh in mode, which starts a child (with setsid when
// asked) and prints its pid; it returns the process and the child's pid.
func startWithChild(t *testing.T, mode Mode, setsid bool) (*Process, int) {
	t.Helper()
	child := "sleep 60"
	if setsid {
		if _, err := exec.LookPath("setsid"); err != nil {
			t.Skip("setsid not installed")
		}
		child = "setsid sleep 60"
	}
	cmd := exec.Command("sh", "-c", child+" & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(cmd, mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if setsid { // wait until the child leads its own session
		err = Poll(time.Now().Add(5*time.Second), 5*time.Millisecond, func() error {
			if f := statFields(pid); len(f) >= 4 && f[3] == strconv.Itoa(pid) {
				return nil
			}
			return errors.New("child not in its own session yet")
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return p, pid
}

// gone reports whether pid has exited (or is a zombie) within 2 s.
func gone(pid int) bool {
	err := Poll(time.Now().Add(2*time.Second), 5*time.Millisecond, func() error {
		if f := statFields(pid); len(f) == 0 || f[0] == "Z" {
			return nil
		}
		return errors.New("alive")
	})
	return err == nil
}

// TestKillReaches checks which children Kill reaches in each mode; Single,
// and Group for a setsid child, are the negative controls.
func TestKillReaches(t *testing.T) {
	for _, c := range []struct {
		name   string
		mode   Mode
		setsid bool
		want   bool
	}{
		{"group", Group, false, true},
		{"single", Single, false, false},
		{"group-setsid", Group, true, false},
		{"tree-setsid", Tree, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, child := startWithChild(t, c.mode, c.setsid)
			if c.mode == Tree && !containsInt(Children(p.Pid()), child) {
				t.Fatalf("Children(%d) = %v, no %d", p.Pid(), Children(p.Pid()), child)
			}
			p.Kill()
			if !p.Exited() {
				t.Fatal("Kill returned before the exit")
			}
			if got := gone(child); got != c.want {
				t.Fatalf("child gone = %v, want %v", got, c.want)
			}
		})
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestStop(t *testing.T) {
	p, err := Start(exec.Command("sleep", "60"), Group)
	if err != nil {
		t.Fatal(err)
	}
	p.Stop(syscall.SIGTERM, 30*time.Second)
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Fatalf("Err = %v, want terminated", err)
	}
	// A process ignoring SIGTERM is killed after the timeout.
	cmd := exec.Command("sh", "-c", `trap "" TERM; echo ready; sleep 60`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p, err = Start(cmd, Group); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p.Stop(syscall.SIGTERM, 200*time.Millisecond)
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Err = %v (after %v), want killed", err, time.Since(start))
	}
}

func TestPauseResume(t *testing.T) {
	p, err := Start(exec.Command("sleep", "60"), Group)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if f := statFields(p.Pid()); len(f) == 0 || f[0] != "T" {
		t.Fatalf("state %v once Signal(SIGSTOP) returned, want T", f)
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	err = Poll(time.Now().Add(5*time.Second), 5*time.Millisecond, func() error {
		if f := statFields(p.Pid()); len(f) > 0 && f[0] != "T" {
			return nil
		}
		return errors.New("still stopped")
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPoll(t *testing.T) {
	stop := errors.New("died")
	calls := 0
	err := Poll(time.Now().Add(time.Minute), time.Millisecond, func() error {
		calls++
		return Final(stop)
	})
	if err != stop || calls != 1 {
		t.Fatalf("Poll = %v after %d calls, want %v after 1", err, calls, stop)
	}
	late := errors.New("not yet")
	if err := Poll(time.Now(), time.Millisecond, func() error { return late }); err != late {
		t.Fatalf("Poll past the deadline = %v, want %v", err, late)
	}
	n := 0
	if err := Poll(time.Now().Add(time.Minute), time.Millisecond, func() error {
		if n++; n < 3 {
			return late
		}
		return nil
	}); err != nil || n != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, n)
	}
}

func TestLogBounded(t *testing.T) {
	var l Log
	chunk := []byte(strings.Repeat("x", 1<<20-1) + "\n")
	for range 6 {
		_, _ = l.Write(chunk)
	}
	_, _ = l.Write([]byte("last"))
	s := l.String()
	if len(s) > logMax+len(chunk) || !strings.HasSuffix(s, "last") {
		t.Fatalf("log of %d bytes, suffix %q", len(s), Tail(s, 8))
	}
	var nilLog *Log
	if nilLog.String() != "" {
		t.Fatal("nil Log not empty")
	}
}

func TestHandle(t *testing.T) {
	var h Handle
	if h.Held() || h.Exited() || h.Log() != "" || h.Take() != nil {
		t.Fatal("zero Handle holds something")
	}
	if err := h.Signal(syscall.SIGCONT); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Signal on an empty Handle = %v, want ErrNotRunning", err)
	}
	h.Kill() // harmless
	if err := h.Start(exec.Command("sh", "-c", "echo hello; exec sleep 60"), Group); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Kill)
	if err := Poll(time.Now().Add(5*time.Second), 5*time.Millisecond, func() error {
		if strings.Contains(h.Log(), "hello") {
			return nil
		}
		return errors.New("no hello in the log: " + h.Log())
	}); err != nil {
		t.Fatal(err)
	}
	p := h.Current()
	if !h.Held() || h.Exited() || p == nil {
		t.Fatal("started process not held")
	}
	if err := h.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	h.Stop(syscall.SIGTERM, 30*time.Second) // continues the paused process first
	if h.Held() || !p.Exited() || !strings.Contains(p.Err().Error(), "terminated") {
		t.Fatalf("after Stop: held %v, exited %v, err %v", h.Held(), p.Exited(), p.Err())
	}
	if !strings.Contains(h.Log(), "hello") {
		t.Fatal("the log went with the process")
	}
	if err := h.Start(exec.Command("/nonexistent/binary"), Single); err == nil || h.Held() {
		t.Fatalf("Start of a missing binary = %v, held %v", err, h.Held())
	}
}

// fakeTB records what a test helper did to its test.
type fakeTB struct {
	testing.TB
	cleanups int
	fatal    string
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Cleanup(func())        { f.cleanups++ }
func (f *fakeTB) Fatalf(string, ...any) { f.fatal = "fatal" }

func TestLaunched(t *testing.T) {
	v := 1
	closed := 0
	f := &fakeTB{}
	if got := Launched(f, "x", &v, nil, func(*int) { closed++ }); got != &v || f.cleanups != 1 || f.fatal != "" {
		t.Fatalf("ok launch: got %v, cleanups %d, fatal %q", got, f.cleanups, f.fatal)
	}
	f = &fakeTB{}
	Launched(f, "x", &v, errors.New("boom"), func(*int) {})
	if f.cleanups != 1 || f.fatal == "" {
		t.Fatalf("half-started: cleanups %d, fatal %q; want the cleanup and a failure", f.cleanups, f.fatal)
	}
	f = &fakeTB{}
	Launched[int](f, "x", nil, errors.New("boom"), func(*int) {})
	if f.cleanups != 0 || f.fatal == "" {
		t.Fatalf("not started: cleanups %d, fatal %q; want no cleanup and a failure", f.cleanups, f.fatal)
	}
}

func TestWithin(t *testing.T) {
	var left time.Duration
	ok := Within(time.Minute, func(ctx context.Context) bool {
		dl, has := ctx.Deadline()
		left = time.Until(dl)
		return has
	})
	if !ok || left <= 0 || left > time.Minute {
		t.Fatalf("Within gave a context with %v left (deadline set: %v), want (0, 1m]", left, ok)
	}
	if Within(time.Millisecond, func(ctx context.Context) bool { <-ctx.Done(); return false }) {
		t.Fatal("Within returned true for a false probe")
	}
}
