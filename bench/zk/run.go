package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
)

const (
	childEnv = "DLOCKBENCH_ZK_JOB"
	stockKey = "/bench/stock"
	lockKey  = "k"
)

// job is what one process runs.
type job struct {
	Lib        string        `json:"lib"`
	Addr       string        `json:"addr"`
	Goroutines int           `json:"goroutines"`
	Duration   time.Duration `json:"duration"` // 0: one request per goroutine (seed)
	Dir        string        `json:"dir"`      // overlap marker's directory, shared by the processes
	Proc       int           `json:"proc"`
}

// result is what one process (or, merged, a whole run) measured.
type result struct {
	Ops       int64         `json:"ops"`       // critical sections completed
	Successes int64         `json:"successes"` // seed: units of stock sold
	Failures  int64         `json:"failures"`
	Overlaps  int64         `json:"overlaps"`
	FirstErr  string        `json:"first_err,omitempty"`
	Lat       []int64       `json:"lat_ns"` // lock + critical section + unlock, per cycle
	PerWorker []int64       `json:"per_worker"`
	Wall      time.Duration `json:"wall"`
	DataOps   int64         `json:"data_ops"` // the seed's stock reads and writes, not the lock's
	CPU       time.Duration `json:"cpu"`      // the client processes' user + system CPU time
}

func (r *result) merge(o *result) {
	r.Ops += o.Ops
	r.Successes += o.Successes
	r.Failures += o.Failures
	r.Overlaps += o.Overlaps
	if r.FirstErr == "" {
		r.FirstErr = o.FirstErr
	}
	r.Lat = append(r.Lat, o.Lat...)
	r.PerWorker = append(r.PerWorker, o.PerWorker...)
	r.Wall = max(r.Wall, o.Wall)
	r.DataOps += o.DataOps
	r.CPU += o.CPU
}

// cpuTime is this process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runProcess runs j in this process: it sets up the client, the library and
// every goroutine's lock, warms up, calls ready, waits for gate, and runs.
func runProcess(j job, ready func(), gate <-chan struct{}) (*result, error) {
	conn, err := dial(j.Addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	lk, err := newLocker(j.Lib, conn)
	if err != nil {
		return nil, err
	}
	defer lk.close()
	fns := make([]lockFn, j.Goroutines)
	for g := range fns {
		if fns[g], err = lk.worker(); err != nil {
			return nil, err
		}
	}
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	unlock, err := fns[0](wctx, "warm-"+strconv.Itoa(j.Proc))
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := unlock(wctx); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	ready()
	<-gate
	res := &result{}
	ctx, stop := context.WithTimeout(context.Background(), j.Duration)
	if j.Duration == 0 {
		ctx, stop = context.WithTimeout(context.Background(), 2*time.Minute)
	}
	defer stop()
	cpu0, t0 := cpuTime(), time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range fns {
		wg.Go(func() {
			w := &worker{j: j, conn: conn, lock: fns[g]}
			w.loop(ctx)
			mu.Lock()
			defer mu.Unlock()
			res.merge(&w.res)
			res.PerWorker = append(res.PerWorker, w.res.Ops)
		})
	}
	wg.Wait()
	res.Wall, res.CPU = time.Since(t0), cpuTime()-cpu0
	return res, nil
}

// worker is one goroutine's loop.
type worker struct {
	j    job
	conn *zk.Conn
	lock lockFn
	res  result
}

func (w *worker) loop(ctx context.Context) {
	for ctx.Err() == nil {
		t0 := time.Now()
		unlock, err := w.lock(ctx, lockKey)
		if err != nil {
			if w.j.Duration == 0 || !ending(ctx) {
				w.fail(err)
			}
			if w.j.Duration == 0 {
				return
			}
			continue
		}
		cerr := w.critical(context.WithoutCancel(ctx))
		uerr := unlock(context.WithoutCancel(ctx))
		if err := errors.Join(cerr, uerr); err != nil {
			w.fail(err)
		} else {
			w.res.Ops++
			w.res.Lat = append(w.res.Lat, int64(time.Since(t0)))
		}
		if w.j.Duration == 0 {
			return // seed: one request per goroutine
		}
	}
}

// critical is the protected work: enter the overlap marker (a directory
// every process shares: mkdir fails if another holder is inside) and, in
// the seed scenario, sell one unit of stock (read, then write stock-1).
func (w *worker) critical(context.Context) error {
	marker := filepath.Join(w.j.Dir, "inside")
	if err := os.Mkdir(marker, 0o700); err != nil {
		w.res.Overlaps++
	} else {
		defer os.Remove(marker)
	}
	if w.j.Duration != 0 {
		return nil
	}
	w.res.DataOps++
	b, _, err := w.conn.Get(stockKey)
	if err != nil {
		return fmt.Errorf("read stock: %w", err)
	}
	n, err := strconv.Atoi(string(b))
	if err != nil || n <= 0 {
		return err // sold out: not a success
	}
	w.res.DataOps++
	// Unconditional (version -1): only the lock keeps this read-modify-write
	// from losing an update.
	if _, err := w.conn.Set(stockKey, []byte(strconv.Itoa(n-1)), -1); err != nil {
		return err
	}
	w.res.Successes++
	return nil
}

// ending reports whether ctx has ended or ends within 100 ms: a call cut by
// the end of a timed run (the server may see the propagated deadline before
// the client's timer fires) is not a failure.
func ending(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ctx.Err() != nil || (ok && time.Until(d) < 100*time.Millisecond)
}

func (w *worker) fail(err error) {
	w.res.Failures++
	if w.res.FirstErr == "" {
		w.res.FirstErr = err.Error()
	}
}

// child runs the job in $DLOCKBENCH_ZK_JOB: it says READY, waits for a
// line on stdin, runs, and prints its result as JSON.
func child(spec string) int {
	var j job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	gate := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		close(gate)
	}()
	res, err := runProcess(j, func() { fmt.Println("READY") }, gate)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 2
	}
	return 0
}

// runProcs runs j in procs child processes (this program again), started
// together once every one is ready (ready is called then, before they
// start), and merges their results.
func runProcs(j job, procs int, ready func()) (*result, error) {
	type proc struct {
		cmd *exec.Cmd
		in  interface{ Write([]byte) (int, error) }
		out *bufio.Scanner
	}
	var ps []proc
	defer func() {
		for _, p := range ps {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	}()
	for i := range procs {
		j.Proc = i
		spec, _ := json.Marshal(j)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		ps = append(ps, proc{cmd, in, sc})
	}
	for i, p := range ps {
		if !p.out.Scan() || p.out.Text() != "READY" {
			return nil, fmt.Errorf("process %d did not get ready: %q %v", i, p.out.Text(), p.out.Err())
		}
	}
	ready()
	for _, p := range ps {
		if _, err := p.in.Write([]byte("GO\n")); err != nil {
			return nil, err
		}
	}
	total := &result{}
	for i, p := range ps {
		if !p.out.Scan() {
			return nil, fmt.Errorf("process %d: no result: %v", i, p.out.Err())
		}
		var r result
		if err := json.Unmarshal(p.out.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("process %d: %w", i, err)
		}
		total.merge(&r)
	}
	return total, nil
}
