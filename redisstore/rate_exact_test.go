package redisstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// The exactness run: processes of this test binary (rateChildEnv set)
// hammer one key through their own clients, started together by the parent,
// and report what they were admitted.

const (
	rateChildEnv = "DLOCK_RATE_CHILD"  // the Redis address
	ratePrefix   = "DLOCK_RATE_PREFIX" // the child's store prefix (the control's own budgets)
	rateKey      = "exact"
)

// The run's shape: 200 a second with a burst of 100, for 3 s, from 2
// processes × 16 goroutines. The burst (half a second of the rate) lets a
// stall of the machine shorter than that lose nothing.
var (
	exactLimit = driver.RateLimit{Rate: 200, Period: time.Second, Burst: 100}
	exactFor   = 3 * time.Second
)

const exactProcs, exactGoroutines = 2, 16

// rateReport is what a child prints: its admissions and calls, the wall
// clock (ns) when its first call was sent and its last answer came, and
// its errors.
type rateReport struct {
	Admitted, Calls int64
	First, Last     int64
	Errors          []string
}

// runRateChild is a child process: it says "ready", waits for a line on
// stdin, then runs exactGoroutines goroutines on one client for exactFor and
// prints its rateReport.
func runRateChild() int {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(rateChildEnv), PoolSize: 2 * exactGoroutines})
	defer rdb.Close()
	s, _ := redisstore.New(rdb, &redisstore.Options{Prefix: os.Getenv(ratePrefix)})
	defer s.Close()
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 2
	}
	var rep rateReport
	var admitted, calls atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	rep.First = time.Now().UnixNano()
	end := time.Now().Add(exactFor)
	for range exactGoroutines {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), exactFor+30*time.Second)
			defer cancel()
			for time.Now().Before(end) {
				r, err := s.AllowN(ctx, rateKey, exactLimit, 1)
				if err != nil {
					mu.Lock()
					rep.Errors = append(rep.Errors, err.Error())
					mu.Unlock()
					return
				}
				calls.Add(1)
				admitted.Add(int64(r.Allowed))
			}
		})
	}
	wg.Wait()
	rep.Last = time.Now().UnixNano()
	rep.Admitted, rep.Calls = admitted.Load(), calls.Load()
	_ = json.NewEncoder(os.Stdout).Encode(rep)
	return 0
}

// TestRateExactAcrossProcesses: 2 processes × 16 goroutines on one key at
// 200/s, burst 100, for 3 s. GCRA admits no more than the burst plus one
// per interval of the time between the first call sent and the last answer
// (no tolerance), and, as someone is always asking, no fewer than 99 % of
// the burst plus one per interval of the time all processes ran together.
// The processes' clocks play no part: the store reads Redis's (the
// rate-caller-clock mutant of package drivertest is the control for that).
// The control: the same run with a budget per process (a store prefix of
// its own, as a limiter in each process would have) admits too many.
func TestRateExactAcrossProcesses(t *testing.T) {
	if err := checkExact(t, runExact(t, false)); err != nil {
		t.Fatal(err)
	}
	if err := checkExact(t, runExact(t, true)); err == nil {
		t.Fatal("the control, a budget per process, passed the bounds")
	}
}

// runExact runs the processes on a fresh server and returns their reports;
// with own, each process has its own store prefix.
func runExact(t *testing.T, own bool) []rateReport {
	t.Helper()
	srv, _ := newRedis(t)
	ctx := testCtx(t)
	ins := make([]io.WriteCloser, exactProcs)
	outs := make([]*bufio.Reader, exactProcs)
	cmds := make([]*exec.Cmd, exactProcs)
	for p := range exactProcs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), rateChildEnv+"="+srv.Addr())
		if own {
			cmd.Env = append(cmd.Env, fmt.Sprintf("%s=p%d:", ratePrefix, p))
		}
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[p], ins[p], outs[p] = cmd, in, bufio.NewReader(out)
		if line, err := outs[p].ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("process %d: %q, %v; want ready", p, line, err)
		}
	}
	for _, in := range ins {
		_, _ = io.WriteString(in, "go\n")
	}
	reps := make([]rateReport, exactProcs)
	for p := range exactProcs {
		if err := json.NewDecoder(outs[p]).Decode(&reps[p]); err != nil {
			t.Fatalf("process %d's report: %v", p, err)
		}
		if err := cmds[p].Wait(); err != nil {
			t.Fatalf("process %d: %v", p, err)
		}
	}
	return reps
}

// checkExact holds the reports to the bounds of
// TestRateExactAcrossProcesses, failing t for a call that failed.
func checkExact(t *testing.T, reps []rateReport) error {
	t.Helper()
	var admitted, calls int64
	first, last := reps[0].First, reps[0].Last // the union of the runs
	start, stop := first, last                 // their intersection
	for _, r := range reps {
		for _, e := range r.Errors[:min(len(r.Errors), 3)] {
			t.Errorf("a call failed: %s", e)
		}
		admitted, calls = admitted+r.Admitted, calls+r.Calls
		first, last = min(first, r.First), max(last, r.Last)
		start, stop = max(start, r.First), min(stop, r.Last)
	}
	together := time.Duration(max(stop-start, 0))
	iv := exactLimit.Interval()
	most := int64(exactLimit.Burst) + int64(time.Duration(last-first)/iv)
	least := 0.99 * float64(int64(exactLimit.Burst)+int64(together/iv))
	t.Logf("%d of %d calls admitted over %v (%v together): want %.0f to %d", admitted, calls, time.Duration(last-first), together, least, most)
	if admitted > most {
		return fmt.Errorf("%d admitted: more than the burst of %d plus one per %v over %v (%d)", admitted, exactLimit.Burst, iv, time.Duration(last-first), most)
	}
	if float64(admitted) < least {
		return fmt.Errorf("%d admitted: fewer than 99%% of the burst plus one per %v over the %v the processes ran together (%.0f)", admitted, iv, together, least)
	}
	return nil
}
