package etcdstore_test

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
	"example.com/dlock/etcdstore"
	"example.com/dlock/etcdstore/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The holder runs in a child process (this test binary again, chosen by
// childEnv before TestMain starts any server), so that SIGSTOP freezes it
// whole: its renewal, its etcd client, its work.
const childEnv = "ETCDSTORE_FAULT_CHILD"

func init() {
	if os.Getenv(childEnv) == "holder" {
		os.Exit(holderChild())
	}
}

// holderChild locks "k", builds its fenced write (OwnerCmp) as an
// application would before writing, says "HELD <fence>", then waits for a
// line on stdin and writes the resource: through the guard, or without it
// (ETCDSTORE_FAULT_MODE=unguarded, the bug the guard prevents). It says
// "WRITE <landed>" and exits.
func holderChild() int {
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(os.Getenv("ETCDSTORE_FAULT_EPS"), ","),
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fmt.Println("ERR", err)
		return 2
	}
	defer cli.Close()
	s, err := etcdstore.New(cli, etcdstore.Options{Prefix: os.Getenv("ETCDSTORE_FAULT_PFX"), SessionTTL: faultTTL})
	if err != nil {
		fmt.Println("ERR", err)
		return 2
	}
	dc, err := dlock.New(s, dlock.WithAutoRenew(faultTTL))
	if err != nil {
		fmt.Println("ERR", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := dc.Lock(ctx, "k")
	if err != nil {
		fmt.Println("ERR", err)
		return 2
	}
	cmp, err := s.OwnerCmp("k", l.Fence())
	if err != nil {
		fmt.Println("ERR", err)
		return 2
	}
	fmt.Println("HELD", l.Fence())
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Println("ERR", err)
		return 2
	}
	txn := cli.Txn(ctx)
	if os.Getenv("ETCDSTORE_FAULT_MODE") != "unguarded" {
		txn = txn.If(cmp)
	}
	resp, err := txn.Then(clientv3.OpPut(os.Getenv("ETCDSTORE_FAULT_RES"), "stale write of fence "+strconv.FormatUint(l.Fence(), 10))).Commit()
	if err != nil {
		fmt.Println("ERR", err)
		return 2
	}
	fmt.Println("WRITE", resp.Succeeded)
	return 0
}

// The holder process is SIGSTOPped past its session TTL (3 s) on a 3-member
// cluster. Invariant: the next holder gets a greater fence, and the stopped
// holder, resumed, has its fenced write (a Txn guarded by OwnerCmp, built
// before the stop) rejected by etcd; the resource keeps the new holder's
// value. Negative control (unguarded): the same write without the guard
// lands over the new holder's value, the lost update the guard prevents.
func TestPausedHolderFencedWriteRejected(t *testing.T) {
	c := etcdtest.StartCluster(t, 3)
	for _, mode := range []string{"guarded", "unguarded"} {
		t.Run(mode, func(t *testing.T) { pausedHolder(t, c, mode) })
	}
}

// holderProc is the child process of holderChild and its output.
type holderProc struct {
	cmd   *exec.Cmd
	stdin io.Writer
	lines *bufio.Scanner
}

// startHolder starts holderChild on c with the lock prefix pfx, the
// resource key res and the write mode; it is killed when the test ends.
func startHolder(t *testing.T, ctx context.Context, c *etcdtest.Cluster, pfx, res, mode string) *holderProc {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=holder", "ETCDSTORE_FAULT_EPS="+strings.Join(c.Endpoints(), ","),
		"ETCDSTORE_FAULT_PFX="+pfx, "ETCDSTORE_FAULT_RES="+res, "ETCDSTORE_FAULT_MODE="+mode)
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
	if !h.lines.Scan() {
		t.Fatalf("child ended before %s: %v", want, h.lines.Err())
	}
	f := strings.Fields(h.lines.Text())
	if len(f) != 2 || f[0] != want {
		t.Fatalf("child said %q, want %s", h.lines.Text(), want)
	}
	return f[1]
}

func pausedHolder(t *testing.T, c *etcdtest.Cluster, mode string) {
	pfx := uniq(t)
	res := pfx + "resource"
	ctx := ctxT(t, 60*time.Second)
	h := startHolder(t, ctx, c, pfx, res, mode)
	cmd, stdin := h.cmd, h.stdin
	line := func(want string) string { return h.line(t, want) }
	oldFence, _ := strconv.ParseUint(line("HELD"), 10, 64)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()

	s, cli := newStore(t, c, pfx, faultTTL)
	dc, err := dlock.New(s, dlock.WithAutoRenew(faultTTL))
	if err != nil {
		t.Fatal(err)
	}
	l, err := dc.Lock(ctx, "k", dlock.WithWait(4*faultTTL))
	if err != nil {
		t.Fatalf("next holder: %v", err)
	}
	grantedAfter := time.Since(stoppedAt)
	defer l.Release(context.Background())
	if l.Fence() <= oldFence {
		t.Fatalf("next holder's fence %d not greater than the stopped holder's %d", l.Fence(), oldFence)
	}
	cmp, err := s.OwnerCmp("k", l.Fence())
	if err != nil {
		t.Fatal(err)
	}
	const mine = "the next holder's write"
	if r, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(res, mine)).Commit(); err != nil || !r.Succeeded {
		t.Fatalf("the next holder's guarded write: %v %v", r, err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintln(stdin, "GO"); err != nil {
		t.Fatal(err)
	}
	landed := line("WRITE") == "true"
	got, err := cli.Get(ctx, res)
	if err != nil || len(got.Kvs) != 1 {
		t.Fatal(got, err)
	}
	t.Logf("RESULT %s: stopped holder's fence %d, next holder's %d granted %v after the stop; stale write landed=%v; resource %q",
		mode, oldFence, l.Fence(), grantedAfter.Round(time.Millisecond), landed, got.Kvs[0].Value)
	if mode == "unguarded" {
		if !landed || string(got.Kvs[0].Value) == mine {
			t.Fatal("negative control: the unguarded stale write did not land; the test cannot see the bug")
		}
		return
	}
	if landed || string(got.Kvs[0].Value) != mine {
		t.Fatalf("the stopped holder's fenced write landed=%v; resource %q", landed, got.Kvs[0].Value)
	}
}
