// Package proc is the process plumbing shared by the test-server launchers
// (internal/etcdserver, zkserver, pgserver, mysqlserver, redisserver): free
// loopback ports, a started process with its exit awaited in the
// background, signals to the process, its process group or its process and
// every child, a graceful stop that escalates to SIGKILL, polling with a
// deadline and a bounded log. What a server is (its configuration, its
// readiness probe, its bootstrap) stays in its launcher.
//
// It has no dependency outside the standard library.
package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Mode says what a Process's signals reach.
type Mode int

const (
	// Single: the process runs in the test's process group and signals
	// reach it alone.
	Single Mode = iota
	// Group: the process leads its own process group and signals reach the
	// whole group.
	Group
	// Tree: the process leads its own process group and signals reach it
	// and each of its children, also those that called setsid (see
	// SignalTree).
	Tree
)

// Process is a started command whose exit is awaited in the background.
type Process struct {
	cmd  *exec.Cmd
	mode Mode
	done chan struct{}
	err  error // cmd.Wait's result, set before done is closed
}

// Start starts cmd in mode. It keeps the credential cmd.SysProcAttr may
// carry, puts the process in its own process group unless mode is Single,
// and (on Linux) has the kernel SIGKILL it when the test binary dies. On
// failure nothing runs and the error is exec's.
func Start(cmd *exec.Cmd, mode Mode) (*Process, error) {
	cmd.SysProcAttr = sysProcAttr(cmd.SysProcAttr, mode != Single)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, mode: mode, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err returns how the process ended (exec.Cmd.Wait's error), nil while it
// runs.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// stopWait bounds how long Signal(SIGSTOP) waits for the process to stop.
const stopWait = time.Second

// Signal sends sig to what the process's mode reaches: the process, its
// group, or it and each child. For SIGSTOP it then waits (up to 1 s; where
// there is no /proc, not at all) until every thread of the process is
// stopped, since a signal is delivered asynchronously: a paused server
// answers nothing once Signal returns. It returns the error of the signal
// to the process (or group) itself.
func (p *Process) Signal(sig syscall.Signal) error {
	var err error
	switch p.mode {
	case Group:
		err = syscall.Kill(-p.Pid(), sig)
	case Tree:
		err = SignalTree(p.Pid(), sig)
	default:
		err = syscall.Kill(p.Pid(), sig)
	}
	if err == nil && sig == syscall.SIGSTOP {
		WaitStopped(p.Pid(), stopWait)
	}
	return err
}

// Kill sends SIGCONT then SIGKILL to what the mode reaches, unless the
// process has already exited (its pid, not yet reaped, cannot have been
// reused), and waits until it has exited.
func (p *Process) Kill() {
	if !p.Exited() {
		_ = p.Signal(syscall.SIGCONT)
		_ = p.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// Stop continues what the mode reaches (SIGCONT, in case it is paused),
// sends sig to the process alone (a server shuts its own children down),
// and waits up to timeout for it to exit; then it kills it (see Kill). It
// always returns with the process gone.
func (p *Process) Stop(sig syscall.Signal, timeout time.Duration) {
	if !p.Exited() {
		_ = p.Signal(syscall.SIGCONT)
		_ = syscall.Kill(p.Pid(), sig)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.Kill()
	}
}

// FreePorts returns n distinct free loopback ports: free when asked, all
// listened on at once so none repeats. Another process may take one before
// the server binds it; the start then fails loudly.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// FreePort returns one free loopback port (see FreePorts).
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// errFinal marks an error that ends Poll at once.
type errFinal struct{ err error }

func (e errFinal) Error() string { return e.err.Error() }

// Final wraps err so that Poll returns it (unwrapped) at once instead of
// trying again: the process died, there is nothing to wait for.
func Final(err error) error { return errFinal{err} }

// Poll calls check every interval until it returns nil, or an error made by
// Final (Poll returns the error inside), or deadline passes, when Poll
// returns check's last error. It is for waiting on a process we started;
// the deadline bounds it.
func Poll(deadline time.Time, interval time.Duration, check func() error) error {
	for {
		err := check()
		if err == nil {
			return nil
		}
		if f, ok := errors.AsType[errFinal](err); ok {
			return f.err
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(interval) // polling a process we started, with a deadline
	}
}

// Required reports whether missing server binaries fail tests (the
// environment variable CI is "true") rather than skip them.
func Required() bool { return os.Getenv("CI") == "true" }

// FileExists reports whether p names something that is not a directory.
func FileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Tail returns at most the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Within calls probe (a readiness check) with a context that ends after d,
// and returns its answer.
func Within(d time.Duration, probe func(context.Context) bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return probe(ctx)
}
