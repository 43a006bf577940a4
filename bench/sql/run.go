package main

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"example.com/dlock/bench/internal/cmp"
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
	Open     *cmp.Arrivals `json:"open,omitempty"` // an open-loop run (cmp.OpenLoop) instead of the closed loop
}

// result is what one process (or, merged, a whole run) measured. Its
// latencies also hold the waits the end cut short, at their length then.
type result struct {
	cmp.Tally
	Trips    int64 `json:"trips"`      // the lock's database round trips (not the seed's data)
	Stmts    int64 `json:"stmts"`      // the lock's statements
	Dials    int64 `json:"dials"`      // connections opened during the timed part
	Unfinish int64 `json:"unfinished"` // waits the end (or the seed's cap) cut short
}

func (r *result) merge(o *result) {
	r.Tally.Merge(&o.Tally)
	r.Trips += o.Trips
	r.Stmts += o.Stmts
	r.Dials += o.Dials
	r.Unfinish += o.Unfinish
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
	if err := cmp.WarmUp(ctx, lk.lock, j.Proc); err != nil {
		return nil, err
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
	if j.Open != nil {
		res.OpenLoop(j.Open.Schedule(j.Proc, j.Duration), j.Duration, slices.Repeat([]cmp.LockFn{lk.lock}, j.Goroutines), lockKey, j.Dir, nil)
	} else {
		cmp.Workers(res, j.Goroutines, func(int) *result {
			w := &worker{j: j, data: data}
			w.res.Loop(rctx, cmp.Cycle{Lock: lk.lock, Key: lockKey, Critical: w.critical, Once: j.Seed, Cut: w.cut})
			return &w.res
		}, res.merge)
	}
	res.Trips, res.Dials, res.Stmts = ctr.trips.Load()-trips0, ctr.dials.Load()-dials0, ctr.stmts.Load()-stmts0
	return res, nil
}

// worker is one goroutine's state.
type worker struct {
	j    job
	data *sql.DB
	res  result
}

// cut sees a lock error: a wait the end cut short counts in the latencies
// at its length so far (a lower bound), so that a starved waiter shows in
// p99; in the seed, the cap ending a wait is reported, not a failure.
func (w *worker) cut(ctx context.Context, t0 time.Time) (excused bool) {
	if ctx.Err() == nil {
		return false
	}
	w.res.Unfinish++
	w.res.Lat = append(w.res.Lat, int64(time.Since(t0)))
	return w.j.Seed
}

// critical is the protected work: enter the overlap marker (a directory
// every process shares: mkdir fails if another holder is inside) and, in
// the seed scenario, sell one unit of stock (read, then write stock-1).
func (w *worker) critical(ctx context.Context) error {
	defer w.res.Enter(w.j.Dir)()
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
