// Package faulttest is the test support shared by the stores' fault tests
// (etcdstore, zkstore, pgstore, mysqlstore): child processes that run a
// role of the test binary and speak a line protocol (so that SIGSTOP
// freezes a holder whole), the seed's stock scenario with a fault injector,
// holders and contenders that record their windows in an overlap.Recorder,
// broken stores for the negative controls, seeds and polling with a
// deadline. What a store is (its server, its SQL, its fenced resource)
// stays in its tests.
package faulttest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/internal/proc"
)

// Roles are the child roles of a test binary: the binary started again by
// Command or Start with the environment variable Env naming a role runs
// that role from init (Run) and exits with its outcome.
type Roles struct {
	env string
	fns map[string]func() error
}

// NewRoles returns the roles selected by the environment variable env.
func NewRoles(env string) *Roles {
	return &Roles{env: env, fns: map[string]func() error{}}
}

// Register registers fn as role. It returns true, so that a test file can
// register at package variable initialization (var _ = roles.Register(...)),
// before init runs Run. A role registered twice panics.
func (r *Roles) Register(role string, fn func() error) bool {
	if _, dup := r.fns[role]; dup {
		panic("faulttest: role " + role + " registered twice")
	}
	r.fns[role] = fn
	return true
}

// Run is for the test package's init (before TestMain, which may start
// servers): when the environment names a role it runs it and exits, with
// status 0 when it returns nil, 1 with the error on stderr when it fails,
// and 2 for a role not registered. Otherwise it returns at once.
func (r *Roles) Run() {
	role := os.Getenv(r.env)
	if role == "" {
		return
	}
	fn := r.fns[role]
	if fn == nil {
		fmt.Fprintln(os.Stderr, "child: unknown role", role)
		os.Exit(2)
	}
	if err := fn(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Command returns the command that runs role in a child process (the test
// binary, running no test), with env added to this process's environment;
// it is killed when ctx ends.
func (r *Roles) Command(ctx context.Context, role string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), r.env+"="+role), env...)
	return cmd
}

// ReadTimeout bounds how long Child.Read waits for a line.
const ReadTimeout = 5 * time.Minute

// Child is a running child process speaking a line protocol: it reads
// lines on its stdin and writes lines "<word> <rest>" on its stdout. It is
// continued and killed when the test ends (and by the kernel if the test
// binary dies).
type Child struct {
	t   testing.TB
	p   *proc.Process
	in  io.WriteCloser
	out *os.File
	sc  *bufio.Scanner
	log *proc.Log // the child's stderr
}

// Start starts role (see Command) as a Child of t, killed when ctx ends or
// the test ends; t fails if it cannot start.
func (r *Roles) Start(t testing.TB, ctx context.Context, role string, env ...string) *Child {
	t.Helper()
	cmd := r.Command(ctx, role, env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Our own pipe rather than StdoutPipe: proc.Start waits for the exit in
	// the background, and exec would close a pipe of its own there, losing
	// the child's last lines not yet read.
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	log := &proc.Log{}
	cmd.Stdout, cmd.Stderr = w, log
	p, err := proc.Start(cmd, proc.Single)
	_ = w.Close() // the child has its copy
	if err != nil {
		_ = out.Close()
		t.Fatal(err)
	}
	c := &Child{t: t, p: p, in: in, out: out, sc: bufio.NewScanner(out), log: log}
	t.Cleanup(func() {
		p.Kill()
		_ = out.Close()
	})
	return c
}

// Pid returns the child's process id.
func (c *Child) Pid() int { return c.p.Pid() }

// Read returns the rest of the child's next line, whose first word must be
// want (it fails the test otherwise, or when the child ends first, or after
// ReadTimeout).
func (c *Child) Read(want string) string {
	c.t.Helper()
	_ = c.out.SetReadDeadline(time.Now().Add(ReadTimeout))
	if !c.sc.Scan() {
		c.t.Fatalf("child ended before %q (%v): %v", want, c.sc.Err(), c.waitBriefly())
	}
	line := c.sc.Text()
	word, rest, _ := strings.Cut(line, " ")
	if word != want {
		c.t.Fatalf("child said %q, want %q...; stderr: %s", line, want, proc.Tail(c.log.String(), 2000))
	}
	return strings.TrimSpace(rest)
}

// Value is Read for a line "<want> <value>" of exactly two words: it
// returns the value.
func (c *Child) Value(want string) string {
	c.t.Helper()
	v := c.Read(want)
	if v == "" || strings.ContainsAny(v, " \t") {
		c.t.Fatalf("child said %q after %q, want one word", v, want)
	}
	return v
}

// Send writes line to the child's stdin.
func (c *Child) Send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// Signal sends sig to the child; for SIGSTOP it returns once the child is
// stopped (see proc.Process.Signal). The test fails if the signal cannot
// be sent.
func (c *Child) Signal(sig syscall.Signal) {
	c.t.Helper()
	if err := c.p.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
}

// StopHolder reads the child's line "<word> <fence>" (a holder saying
// what it holds), SIGSTOPs the child and returns the fence and when the
// child was stopped. The test fails if the line is not that.
func (c *Child) StopHolder(word string) (fence uint64, stoppedAt time.Time) {
	c.t.Helper()
	v := c.Value(word)
	fence, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		c.t.Fatalf("child's fence %q: %v", v, err)
	}
	c.Signal(syscall.SIGSTOP)
	return fence, time.Now()
}

// Resume continues the stopped child (SIGCONT) and sends it line.
func (c *Child) Resume(line string) {
	c.t.Helper()
	c.Signal(syscall.SIGCONT)
	c.Send(line)
}

// Wait waits for the child to exit and returns how it ended: nil, or its
// exit error with its stderr. It may be called more than once.
func (c *Child) Wait() error {
	<-c.p.Done()
	return c.exitErr()
}

// waitBriefly is Wait bounded to 10 s, for a child whose stdout has ended.
func (c *Child) waitBriefly() error {
	select {
	case <-c.p.Done():
		return c.exitErr()
	case <-time.After(10 * time.Second):
		return errors.New("child still running 10 s after its stdout ended")
	}
}

func (c *Child) exitErr() error {
	if err := c.p.Err(); err != nil {
		return fmt.Errorf("%w: %s", err, proc.Tail(c.log.String(), 4000))
	}
	return nil
}

// stdin is the child's stdin, read a line at a time by ReadLine.
var stdin = sync.OnceValue(func() *bufio.Scanner { return bufio.NewScanner(os.Stdin) })

// ReadLine is the child side of the protocol: it waits for the next line
// on stdin (the parent's Send) and returns it, or an error when stdin ends
// first.
func ReadLine() (string, error) {
	if in := stdin(); in.Scan() {
		return in.Text(), nil
	}
	return "", fmt.Errorf("stdin ended before a line (%v)", stdin().Err())
}
