package zkstore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/zkserver"
	"example.com/dlock/zkstore"
	"github.com/go-zookeeper/zk"
)

// The holder runs in a child process (this test binary again, chosen by
// childEnv before any test starts), so that SIGSTOP freezes it whole: its
// session's pings, its renewal, its work.
const childEnv = "ZKSTORE_FAULT_CHILD"

func init() {
	if os.Getenv(childEnv) == "holder" {
		os.Exit(holderChild())
	}
}

// holderChild locks "k" on the ensemble in ZKSTORE_FAULT_ADDRS under
// ZKSTORE_FAULT_ROOT, says "HELD <fence>", then waits for a line on stdin
// and writes the fenced resource ZKSTORE_FAULT_RES with its fence (or
// without the fence check: ZKSTORE_FAULT_MODE=unfenced, the bug fencing
// prevents). It says "WRITE <landed>" and exits.
func holderChild() int {
	fail := func(err error) int { fmt.Println("ERR", err); return 2 }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := zkstore.Dial(ctx, strings.Split(os.Getenv("ZKSTORE_FAULT_ADDRS"), ","),
		zkstore.Options{Root: os.Getenv("ZKSTORE_FAULT_ROOT"), SessionTimeout: faultTimeout})
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	conn := s.Conn()
	dc, err := dlock.New(s, dlock.WithAutoRenew(faultTimeout))
	if err != nil {
		return fail(err)
	}
	l, err := dc.Lock(ctx, "k")
	if err != nil {
		return fail(err)
	}
	fmt.Println("HELD", l.Fence())
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fail(err)
	}
	landed, err := retryWrite(conn, os.Getenv("ZKSTORE_FAULT_RES"), l.Fence(), "stale holder",
		os.Getenv("ZKSTORE_FAULT_MODE") == "unfenced")
	if err != nil {
		return fail(err)
	}
	fmt.Println("WRITE", landed)
	return 0
}

// holderProc is the child process of holderChild and its output.
type holderProc struct {
	cmd   *exec.Cmd
	stdin io.Writer
	lines *bufio.Scanner
}

// startHolder starts holderChild on addrs; it is killed when the test ends.
func startHolder(t *testing.T, ctx context.Context, addrs []string, root, res, mode string) *holderProc {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=holder", "ZKSTORE_FAULT_ADDRS="+strings.Join(addrs, ","),
		"ZKSTORE_FAULT_ROOT="+root, "ZKSTORE_FAULT_RES="+res, "ZKSTORE_FAULT_MODE="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGCONT); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &holderProc{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
}

// line reads the child's next line, which must be "<want> <value>", and
// returns the value.
func (h *holderProc) line(t *testing.T, want string) string {
	t.Helper()
	if !h.lines.Scan() {
		t.Fatalf("child ended before %s: %v", want, h.lines.Err())
	}
	f := strings.Fields(h.lines.Text())
	if len(f) != 2 || f[0] != want {
		t.Fatalf("child said %q, want %s", h.lines.Text(), want)
	}
	return f[1]
}

// The holder process is SIGSTOPped past its session timeout (3 s) on a
// 3-server ensemble. Invariants: another Client gets the key once the
// stopped holder's session expired, with a greater fence; the stopped
// holder, resumed, has its fenced write rejected by the fenced resource,
// which keeps the new holder's value. Negative control (unfenced): the
// same write without the fence check lands over the new holder's value.
func TestPausedHolderFencedWriteRejected(t *testing.T) {
	e := zkserver.StartEnsemble(t, 3)
	for _, mode := range []string{"fenced", "unfenced"} {
		t.Run(mode, func(t *testing.T) { pausedHolder(t, e.Addrs(), mode) })
	}
}

func pausedHolder(t *testing.T, addrs []string, mode string) {
	root := testPath(t)
	res := root + "-resource"
	ctx := testCtx(t, 90*time.Second)
	s, conn := newFaultStore(t, addrs, root, faultTimeout)
	if _, err := conn.Create(res, []byte("0 initial"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	h := startHolder(t, ctx, addrs, root, res, mode)
	oldFence, err := strconv.ParseUint(h.line(t, "HELD"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()

	dc := newFaultClient(t, s, faultTimeout)
	l, err := dc.Lock(ctx, "k", dlock.WithWait(4*faultTimeout))
	if err != nil {
		t.Fatalf("next holder: %v", err)
	}
	grantedAfter := time.Since(stoppedAt)
	defer l.Release(context.Background())
	if l.Fence() <= oldFence {
		t.Fatalf("next holder's fence %d not greater than the stopped holder's %d", l.Fence(), oldFence)
	}
	if ok, err := fencedWrite(conn, res, l.Fence(), "next holder", false); !ok || err != nil {
		t.Fatalf("the next holder's fenced write: %v %v", ok, err)
	}
	if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintln(h.stdin, "GO"); err != nil {
		t.Fatal(err)
	}
	landed := h.line(t, "WRITE") == "true"
	value := resourceValue(t, conn, res)
	t.Logf("RESULT %s: stopped holder's fence %d, next holder's %d granted %v after the stop; stale write landed=%v; resource %q",
		mode, oldFence, l.Fence(), grantedAfter.Round(time.Millisecond), landed, value)
	if mode == "unfenced" {
		if !landed || value != "stale holder" {
			t.Fatal("negative control: the unfenced stale write did not land; the test cannot see the bug")
		}
		return
	}
	if grantedAfter < faultTimeout/2 { // its last ping was at most a third of the timeout before the stop
		t.Fatalf("the next holder got the key %v after the stop, before the stopped holder's session (%v) could expire", grantedAfter, faultTimeout)
	}
	if landed || value != "next holder" {
		t.Fatalf("the stopped holder's fenced write landed=%v; resource %q", landed, value)
	}
}
