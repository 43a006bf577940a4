package main

import (
	"bufio"
	"bytes"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/cmd/dlock/internal/inventory"
	"example.com/dlock/internal/testkit"
)

// TestDemoEtcd runs the demo with an etcd --store: see checkDemoStore.
func TestDemoEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	store, _ := etcdStore(t)
	out := checkDemoStore(t, store+"?session-ttl=2s", inventory.EtcdStrategy, "dlock")
	if !strings.Contains(out.Server, "etcd strategy's lock on etcd") {
		t.Errorf("the server names the etcd lock: %q", out.Server)
	}
	if d := demoResults(t, out, "dlock")["dlock"]; d.Kind != inventory.KindCorrect {
		t.Errorf("dlock over the embedded Redis in the same run: %+v", d)
	}
}

// TestInventoryServeEtcdLocksInEtcd: an instance with an etcd --store takes
// the etcd strategy's lock in etcd: while `etcdctl lock
// locks/DistributedLock_10000` holds it, a sale waits; once etcdctl ends,
// the sale goes through. The Redis strategies of the same instance do not
// wait for etcdctl (the control: the wait comes from etcd).
func TestInventoryServeEtcdLocksInEtcd(t *testing.T) {
	store, ep := etcdStore(t)
	e, err := inventory.StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	base := startInventory(t, "--store", store, "--redis", e.URL())
	if r, err := demoHTTPPost(base + "/reset?stock=5"); err != nil || r.code != 200 {
		t.Fatalf("reset: %+v %v", r, err)
	}
	stop := filepath.Join(t.TempDir(), "stop")
	hold := etcdctlCmd(t, ep, "locks/"+inventory.LockKey, "sh", "-c", `until [ -e "$1" ]; do sleep 0.05; done`, "sh", stop)
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-hold.Process.Pid, syscall.SIGKILL); _ = hold.Wait() }()
	testkit.WaitFor(t, 20*time.Second, "etcdctl to hold the lock", func() bool {
		r := runDlock(t, nil, "status", "--store", store, inventory.LockKey)
		return strings.Contains(r.stdout, "held:     yes")
	})
	short := &http.Client{Timeout: 1500 * time.Millisecond}
	if resp, err := short.Post(base+"/buy/dlock", "", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the Redis dlock strategy must not wait for etcdctl: %v %v", resp, err)
	}
	if resp, err := short.Post(base+"/buy/etcd", "", nil); err == nil {
		t.Fatalf("a sale went through while etcdctl held the etcd lock: %d", resp.StatusCode)
	}
	if err := writeFile(stop); err != nil { // etcdctl's command ends, and etcdctl unlocks
		t.Fatal(err)
	}
	if err := waitBounded(hold, 20*time.Second); err != nil {
		t.Fatalf("etcdctl lock: %v", err)
	}
	buyStart := time.Now()
	r, err := demoHTTPPost(base + "/buy/etcd")
	t.Logf("the sale after etcdctl ended took %v", time.Since(buyStart))
	if err != nil || r.code != 200 || !strings.Contains(r.body, `"sold"`) {
		t.Fatalf("after etcdctl ended: %+v %v", r, err)
	}
}

// startInventory starts `dlock inventory serve` with args on a free port and
// returns its base URL; the test's cleanup ends it.
func startInventory(t *testing.T, args ...string) string {
	t.Helper()
	cmd := dlockCmd(t, nil, append([]string{"inventory", "serve", "--port", "0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = waitBounded(cmd, 10*time.Second) })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	base, ok := strings.CutPrefix(strings.TrimSpace(line), inventory.ReadyPrefix)
	if err != nil || !ok {
		t.Fatalf("ready line %q: %v\n%s", line, err, stderr.String())
	}
	return base
}

// waitBounded waits for cmd, killing it after d.
func waitBounded(cmd *exec.Cmd, d time.Duration) error {
	timer := time.AfterFunc(d, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	return cmd.Wait()
}

// TestDemoEtcdStrategyNeedsEtcd: asking for the etcd strategy without an
// etcd store is a usage error, before anything starts.
func TestDemoEtcdStrategyNeedsEtcd(t *testing.T) {
	code, _, stderr := runCLI(t, "demo", "--strategies", "dlock,etcd")
	if code != ExitUsage || !strings.Contains(stderr, "needs an etcd store") {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
}
