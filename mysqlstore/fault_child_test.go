package mysqlstore_test

import (
	"bufio"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Child processes for the multi-process fault tests: the test binary,
// started again by childCommand with MYSQLSTORE_CHILD_ROLE set, runs one
// registered role from init (before TestMain, which would start a server)
// and exits with its outcome (status 1 and the error on stderr).
var childRoles = map[string]func() error{}

// registerChild registers a role; it runs at package variable
// initialization, before init.
func registerChild(role string, fn func() error) bool {
	childRoles[role] = fn
	return true
}

func init() {
	role := os.Getenv("MYSQLSTORE_CHILD_ROLE")
	if role == "" {
		return
	}
	fn := childRoles[role]
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

// childCommand returns the command running role in a child process, with
// env added to this process's environment.
func childCommand(role string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "MYSQLSTORE_CHILD_ROLE="+role), env...)
	return cmd
}

// childDB opens a pool of at most maxConns connections on dsn.
func childDB(dsn string, maxConns int) (*sql.DB, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	return db, nil
}

// child is a running child process speaking a line protocol on its stdin
// and stdout; it is continued and killed when the test ends.
type child struct {
	t    *testing.T
	pid  int
	in   io.WriteCloser
	out  *bufio.Scanner
	wait func() error
}

func startChild(t *testing.T, role string, env ...string) *child {
	t.Helper()
	cmd := childCommand(role, env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, pid: cmd.Process.Pid, in: in, out: bufio.NewScanner(out)}
	var waited error
	done := false
	c.wait = func() error {
		if !done {
			done = true
			if err := cmd.Wait(); err != nil {
				waited = fmt.Errorf("%w: %s", err, stderr.String())
			}
		}
		return waited
	}
	t.Cleanup(func() {
		_ = syscall.Kill(c.pid, syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = c.wait()
	})
	return c
}

// read returns the rest of the child's next line, whose first word must be
// want.
func (c *child) read(want string) string {
	c.t.Helper()
	if !c.out.Scan() {
		c.t.Fatalf("child ended before %q: %v", want, c.wait())
	}
	line := c.out.Text()
	if !strings.HasPrefix(line, want) {
		c.t.Fatalf("child said %q, want %q...", line, want)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, want))
}

func (c *child) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

func (c *child) signal(sig syscall.Signal) {
	c.t.Helper()
	if err := syscall.Kill(c.pid, sig); err != nil {
		c.t.Fatal(err)
	}
}

// within polls cond every 10 ms until it holds or d elapses.
func within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	return cond()
}
