package idemhttp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"
)

// The crash between the charge and the completion: an executor process
// (a re-execution of this test binary) charges a fake payment provider,
// then is killed (SIGKILL) or paused (SIGSTOP) before it completes the
// record. The provider is two Redis keys: every charge attempt counts, and
// a set of the charges' idempotency keys is what it actually charges (it
// deduplicates by key, as Stripe does).

const (
	payChildEnv = "IDEMHTTP_PAY_CHILD" // the Redis address
	payModeEnv  = "IDEMHTTP_PAY_MODE"  // "derived" or "fence"
	attemptsKey = "provider:attempts"
	chargesKey  = "provider:charges"
	childLease  = 600 * time.Millisecond
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(payChildEnv); addr != "" {
		os.Exit(runPayChild(addr, os.Getenv(payModeEnv)))
	}
	os.Exit(m.Run())
}

// charge is the provider's API: one attempt, deduplicated by key. mode
// "fence" keys the charge by the execution's fence (the negative control:
// a key that changes with a takeover).
func charge(ctx context.Context, rdb *redis.Client, e dlock.Execution, mode string) error {
	key := e.DownstreamKey("charge")
	if mode == "fence" {
		key = fmt.Sprint("fence-", e.Fence)
	}
	return errors.Join(rdb.Incr(ctx, attemptsKey).Err(), rdb.SAdd(ctx, chargesKey, key).Err())
}

func payGuard(rdb *redis.Client, opts ...dlock.Option) (*dlock.Guard, error) {
	store, err := redisstore.New(rdb, nil)
	if err != nil {
		return nil, err
	}
	return dlock.NewGuard(store, time.Hour, opts...)
}

// runPayChild executes the payment: it charges, says "charged", and waits
// for a line on stdin before returning its result; then it says how the
// completion went: "stored", "stale" or the error.
func runPayChild(addr, mode string) int {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	g, err := payGuard(rdb, dlock.WithAutoRenew(childLease))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	ctx := context.Background()
	_, err = g.Do(ctx, "order-9", "fp", func(ctx context.Context, e dlock.Execution) ([]byte, error) {
		if err := charge(ctx, rdb, e, mode); err != nil {
			return nil, err
		}
		fmt.Println("charged")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		return []byte("child"), nil
	})
	switch {
	case err == nil:
		fmt.Println("stored")
	case errors.Is(err, dlock.ErrStaleFence):
		fmt.Println("stale")
	default:
		fmt.Println("error:", err)
	}
	return 0
}

// TestExecutorCrashAfterTheChargeChargesOnce: killed or paused after the
// charge, the executor is taken over after its lease by a retry (here, a
// waiting Do in the test), which charges again with the same derived key:
// two attempts, one charge. The paused executor, resumed after the
// takeover completed, cannot store its result. Control: a charge keyed by
// the fence charges twice.
func TestExecutorCrashAfterTheChargeChargesOnce(t *testing.T) {
	for _, tc := range []struct {
		name, mode, how string
		charges         int64
	}{{"killed", "derived", "kill", 1}, {"paused", "derived", "pause", 1}, {"control-fence-key", "fence", "kill", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redisserver.Start(t)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			t.Cleanup(func() { _ = rdb.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			child := startPayChild(t, ctx, srv.Addr(), tc.mode)
			child.expect(t, "charged")
			if tc.how == "kill" {
				_ = child.cmd.Process.Kill()
				_ = child.cmd.Wait()
			} else if err := child.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			g, err := payGuard(rdb, dlock.WithWait(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			var took bool
			r, err := g.Do(ctx, "order-9", "fp", func(ctx context.Context, e dlock.Execution) ([]byte, error) {
				took = e.TookOver
				return []byte("retry"), charge(ctx, rdb, e, tc.mode)
			})
			if err != nil || r.Replayed || !took {
				t.Fatalf("the retry = %+v, %v (took over: %v); want it to take over and run", r, err, took)
			}
			if tc.how == "pause" {
				if err := child.cmd.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
				_, _ = io.WriteString(child.stdin, "\n")
				child.expect(t, "stale")
				_ = child.cmd.Wait()
			}
			attempts, _ := rdb.Get(ctx, attemptsKey).Int64()
			charges := rdb.SCard(ctx, chargesKey).Val()
			t.Logf("%s (%s key): %d charge attempts, %d charges", tc.how, tc.mode, attempts, charges)
			if attempts != 2 || charges != tc.charges {
				t.Fatalf("%d attempts, %d charges; want 2 attempts, %d charges", attempts, charges, tc.charges)
			}
			if again, err := g.Do(ctx, "order-9", "fp", func(context.Context, dlock.Execution) ([]byte, error) { return nil, errors.New("ran") }); err != nil || string(again.Value) != "retry" {
				t.Fatalf("replay = %q, %v; want the retry's result", again.Value, err)
			}
		})
	}
}

type payChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startPayChild(t *testing.T, ctx context.Context, addr, mode string) *payChild {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), payChildEnv+"="+addr, payModeEnv+"="+mode)
	cmd.Stderr = os.Stderr
	stdin, err1 := cmd.StdinPipe()
	stdout, err2 := cmd.StdoutPipe()
	if err := errors.Join(err1, err2, cmd.Start()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Process.Signal(syscall.SIGCONT); _ = cmd.Wait() })
	c := &payChild{cmd: cmd, stdin: stdin, lines: make(chan string, 8)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c
}

// expect waits up to 30 s for the child's next line and fails unless it
// is want.
func (c *payChild) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok || strings.TrimSpace(line) != want {
			t.Fatalf("the executor said %q (open %v), want %q", line, ok, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the executor did not say %q within 30 s", want)
	}
}
