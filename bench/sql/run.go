package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

const (
	childEnv = "DLOCKBENCH_SQL_JOB"
	lockKey  = "bench-k"
)

// job is what one process runs.
type job struct {
	conf
	Lib      string        `json:"lib"`
	Duration time.Duration `json:"duration"` // timed scenarios
	Seed     bool          `json:"seed"`     // one request per goroutine, stock in bench_stock
	Cap      time.Duration `json:"cap"`      // seed: the longest it may run
	Dir      string        `json:"dir"`      // overlap marker's directory, shared by the processes
	Proc     int           `json:"proc"`
}

// result is what one process (or, merged, a whole run) measured.
type result struct {
	Ops       int64         `json:"ops"`       // critical sections completed
	Successes int64         `json:"successes"` // seed: units of stock sold
	Failures  int64         `json:"failures"`
	Overlaps  int64         `json:"overlaps"`
	FirstErr  string        `json:"first_err,omitempty"`
	Lat       []int64       `json:"lat_ns"` // lock + critical section + unlock, per cycle; and waits cut by the end
	PerWorker []int64       `json:"per_worker"`
	Wall      time.Duration `json:"wall"`
	Trips     int64         `json:"trips"`      // the lock's database round trips (not the seed's data)
	Stmts     int64         `json:"stmts"`      // the lock's statements
	Dials     int64         `json:"dials"`      // connections opened during the timed part
	CPU       time.Duration `json:"cpu"`        // the client processes' user + system CPU time
	Unfinish  int64         `json:"unfinished"` // waits the end (or the seed's cap) cut short
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
	r.Trips += o.Trips
	r.Stmts += o.Stmts
	r.Dials += o.Dials
	r.CPU += o.CPU
	r.Unfinish += o.Unfinish
}

// cpuTime is this process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runProcess runs j in this process: it opens the library (warm), calls
// ready, waits for gate, and runs j's goroutines.
func runProcess(j job, ready func(), gate <-chan struct{}) (*result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctr := &counter{}
	lk, err := newLocker(ctx, j.Lib, j.conf, ctr)
	if err != nil {
		return nil, err
	}
	defer lk.close()
	var data *sql.DB
	if j.Seed {
		if data, err = openSQL(j.DB, j.URL, &counter{}, 8); err != nil {
			return nil, err
		}
		defer data.Close()
		if err := warm(ctx, data, 8); err != nil {
			return nil, err
		}
	}
	unlock, err := lk.lock(ctx, fmt.Sprintf("warm-%d", j.Proc))
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := unlock(ctx); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	ready()
	<-gate
	res := &result{}
	limit := j.Duration
	if j.Seed {
		limit = j.Cap
	}
	rctx, stop := context.WithTimeout(context.Background(), limit)
	defer stop()
	trips0, dials0, stmts0 := ctr.trips.Load(), ctr.dials.Load(), ctr.stmts.Load()
	cpu0, t0 := cpuTime(), time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range j.Goroutines {
		wg.Go(func() {
			w := &worker{j: j, data: data, lock: lk.lock}
			w.loop(rctx)
			mu.Lock()
			defer mu.Unlock()
			res.merge(&w.res)
			res.PerWorker = append(res.PerWorker, w.res.Ops)
		})
	}
	wg.Wait()
	res.Wall, res.CPU = time.Since(t0), cpuTime()-cpu0
	res.Trips, res.Dials, res.Stmts = ctr.trips.Load()-trips0, ctr.dials.Load()-dials0, ctr.stmts.Load()-stmts0
	return res, nil
}

// worker is one goroutine's loop.
type worker struct {
	j    job
	data *sql.DB
	lock lockFn
	res  result
}

func (w *worker) loop(ctx context.Context) {
	for ctx.Err() == nil {
		t0 := time.Now()
		unlock, err := w.lock(ctx, lockKey)
		if err != nil {
			if ctx.Err() != nil {
				// A wait the end cut short counts in the latencies at
				// its length so far (a lower bound), so that a starved
				// waiter shows in p99.
				w.res.Unfinish++
				w.res.Lat = append(w.res.Lat, int64(time.Since(t0)))
			}
			switch {
			case w.j.Seed && ctx.Err() != nil:
				// the cap ended its wait: reported, not a failure
			case w.j.Seed || !ending(ctx):
				w.fail(err)
			}
			if w.j.Seed {
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
		if w.j.Seed {
			return // one request per goroutine
		}
	}
}

// critical is the protected work: enter the overlap marker (a directory
// every process shares: mkdir fails if another holder is inside) and, in
// the seed scenario, sell one unit of stock (read, then write stock-1).
func (w *worker) critical(ctx context.Context) error {
	marker := filepath.Join(w.j.Dir, "inside")
	if err := os.Mkdir(marker, 0o700); err != nil {
		w.res.Overlaps++
	} else {
		defer os.Remove(marker)
	}
	if !w.j.Seed {
		return nil
	}
	var n int
	if err := w.data.QueryRowContext(ctx, `SELECT n FROM bench_stock WHERE id = 1`).Scan(&n); err != nil {
		return err
	}
	if n <= 0 {
		return nil // sold out: not a success
	}
	q := `UPDATE bench_stock SET n = $1 WHERE id = 1`
	if w.j.DB == dbMySQL {
		q = `UPDATE bench_stock SET n = ? WHERE id = 1`
	}
	if _, err := w.data.ExecContext(ctx, q, n-1); err != nil {
		return err
	}
	w.res.Successes++
	return nil
}

// ending reports whether ctx has ended or ends within 100 ms: a call cut by
// the end of a timed run is not a failure.
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

// child runs the job in $DLOCKBENCH_SQL_JOB: it says READY, waits for a
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
