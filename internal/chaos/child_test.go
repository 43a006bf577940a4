package chaos_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/chaos/history"
	"example.com/dlock/redisstore"
)

// App instances run as separate OS processes (re-executions of this test
// binary), so that SIGSTOP freezes everything they run, renewal included,
// and SIGKILL is a real crash.

func env(name string) string { return os.Getenv("CHAOS_" + name) }

func envInt(name string) int { n, _ := strconv.Atoi(env(name)); return n }

func envDur(name string) time.Duration { d, _ := time.ParseDuration(env(name)); return d }

func runChild(role string) int {
	lockRDB := redis.NewClient(clientOptions(env("LOCK_ADDR")))
	defer lockRDB.Close()
	resRDB := redis.NewClient(clientOptions(env("RES_ADDR")))
	defer resRDB.Close()
	inner, err := redisstore.New(lockRDB, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer inner.Close()
	var store driver.Mutex = inner
	switch env("STORE") {
	case "nocheck":
		store = noCheckStore{inner, lockRDB}
	case "persist":
		store = persistStore{inner, lockRDB}
	}
	locks, err := dlock.New(store)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	switch role {
	case "stock":
		return childStock(ctx, locks, resRDB)
	case "hold":
		return childHold(ctx, locks, resRDB)
	case "commit":
		return childCommit(ctx, locks, lockRDB)
	}
	return 2
}

func childStock(ctx context.Context, locks *dlock.Client, res *redis.Client) int {
	var rec history.Recorder
	cfg := stockConfig{
		Lock: env("LOCK"), Res: env("RES"), TTL: envDur("TTL"), NoLock: env("MODE") == "nolock",
		Unfenced: env("MODE") != "fenced", Deadline: time.Now().Add(envDur("RUN")), Seed: uint64(envInt("SEED")),
	}
	var wg sync.WaitGroup
	for w := range envInt("WORKERS") {
		a := &app{rec: &rec, locks: locks, rdb: res, client: envInt("PROC")*100 + w}
		wg.Go(func() { a.stockWorker(ctx, cfg) })
	}
	wg.Wait()
	if err := history.Encode(os.Stdout, rec.Ops()); err != nil {
		return 1
	}
	return 0
}

// childHold takes the lock (renewed automatically), reads the stock with its
// fence, says HELD, and writes stock−1 when told to on stdin.
func childHold(ctx context.Context, locks *dlock.Client, res *redis.Client) int {
	ttl := envDur("TTL")
	lease := dlock.WithAutoRenew(ttl)
	if env("RENEW") == "no" {
		lease = dlock.WithTTL(ttl)
	}
	l, err := locks.Lock(ctx, env("LOCK"), lease)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold:", err)
		return 1
	}
	fence := l.Fence()
	stock, err := readStock(ctx, res, env("RES"), fence)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold: read:", err)
		return 1
	}
	fmt.Printf("HELD %d\n", fence)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 1
	}
	var rec history.Recorder
	a := &app{rec: &rec, locks: locks, rdb: res, client: 1}
	if env("MODE") != "fenced" {
		fence = 0
	}
	_ = a.write(ctx, env("RES"), "holder", stock-1, fence)
	ops := rec.Ops()
	ops[0].Fence = l.Fence() // the holding's fence, even when written unfenced
	_ = l.Release(ctx)
	if err := history.Encode(os.Stdout, ops); err != nil {
		return 1
	}
	return 0
}

// child is a running app process.
type child struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	stdin  interface{ Write([]byte) (int, error) }
	waited bool
}

// spawn starts an app process with role and CHAOS_* variables from vars.
// The process is killed, if still running, when the test ends.
func spawn(t *testing.T, role string, vars map[string]string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role)
	for k, v := range vars {
		cmd.Env = append(cmd.Env, "CHAOS_"+k+"="+v)
	}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, out: bufio.NewReader(stdout), stdin: stdin}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		if !c.waited {
			_ = cmd.Wait()
		}
	})
	return c
}

// wait reads the child's whole output, then waits for it to exit. Call it
// at most once, from the test goroutine.
func (c *child) wait() ([]history.Op, error) {
	c.waited = true
	ops, derr := history.Decode(c.out)
	err := c.cmd.Wait()
	if err != nil {
		return ops, err
	}
	return ops, derr
}

// line reads one line of output, failing if none comes within d.
func (c *child) line(t *testing.T, d time.Duration) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		s, _ := c.out.ReadString('\n')
		ch <- strings.TrimSpace(s)
	}()
	select {
	case s := <-ch:
		return s
	case <-time.After(d):
		t.Fatalf("no output from child within %v", d)
		return ""
	}
}

func (c *child) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}
