package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

// row is one scenario run with one library.
type row struct {
	db       string
	sc       scenario
	lib      string
	round    int
	res      *result
	final    int // seed: stock left
	oversold bool
}

// runDB starts (or connects to) db's server, runs the selected scenarios
// and writes db's tables. bad reports an overlap or an oversold stock.
func runDB(out io.Writer, db string, o options) (bad bool, err error) {
	srv, err := startServer(db, o)
	if err != nil {
		return false, err
	}
	defer srv.stop()
	c := conf{DB: db, URL: srv.url}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := setup(ctx, c); err != nil {
		return false, fmt.Errorf("setup: %w", err)
	}
	fmt.Fprintf(out, "### %s\n\n%s\n\nload average at the start: %s\n\n", srv.name, srv.version, cmp.LoadAvg())
	defer func() { fmt.Fprintf(out, "load average at the end: %s\n\n", cmp.LoadAvg()) }()
	var libs []string
	for _, l := range libsOf[db] {
		if cmp.Selected(o.libs, l) {
			libs = append(libs, l)
		}
	}
	for _, l := range optionalLibs[db] {
		if o.libs != "all" && cmp.Selected(o.libs, l) {
			libs = append(libs, l)
		}
	}
	var rows []row
	for _, sc := range scenarios {
		if !cmp.Selected(o.only, sc.Name) {
			continue
		}
		for round := range o.rounds {
			if sc.Interleaved {
				pair, err := runInterleaved(c, libs, o.dur, round)
				if err != nil {
					return bad, fmt.Errorf("%s: %w", sc.Name, err)
				}
				for _, r := range pair {
					fmt.Fprintf(os.Stderr, "%s %s round %d %s: %d ops in %v, %d failures\n", db, sc.Name, round+1, r.lib, r.res.Ops, r.res.Wall.Round(time.Millisecond), r.res.Failures)
					bad = bad || r.res.Overlaps > 0
				}
				rows = append(rows, pair...)
				continue
			}
			pair, err := cmp.Alternate(libs, round, func(lib string) (row, error) {
				r, err := runScenario(c, sc, lib, o, round)
				if err != nil {
					return r, fmt.Errorf("%s/%s: %w", sc.Name, lib, err)
				}
				fmt.Fprintf(os.Stderr, "%s %s round %d %s: %d ops in %v, %d failures\n", db, sc.Name, round+1, lib, r.res.Ops, r.res.Wall.Round(time.Millisecond), r.res.Failures)
				return r, nil
			})
			if err != nil {
				return bad, err
			}
			for _, r := range pair {
				bad = bad || r.res.Overlaps > 0 || r.oversold
			}
			rows = append(rows, pair...)
		}
	}
	report(out, db, libs, rows)
	return bad, nil
}

// runScenario runs sc once with lib.
func runScenario(c conf, sc scenario, lib string, o options, round int) (row, error) {
	r := row{db: c.DB, sc: sc, lib: lib, round: round}
	if sc.Wakeup {
		if err := prepare(c, false); err != nil {
			return r, err
		}
		res, err := runWakeup(c, lib, o.dur, o.samples, uint64(time.Now().UnixNano()))
		r.res = res
		return r, err
	}
	dir, err := os.MkdirTemp("", "dlockbench-sql-marker-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	c.Goroutines = sc.Goroutines
	j := job{conf: c, Lib: lib, Duration: o.dur, Dir: dir, Seed: sc.Seed, Cap: o.cap}
	if err := prepare(c, sc.Seed); err != nil {
		return r, err
	}
	if sc.Procs == 1 {
		r.res, err = runProcess(j, func() {}, cmp.Open)
	} else {
		r.res, err = runProcs(j, sc.Procs)
	}
	if err != nil {
		return r, err
	}
	if sc.Seed {
		if r.final, err = getStock(c); err != nil {
			return r, err
		}
		r.oversold = r.final < 0 || int64(100-r.final) != r.res.Successes
	}
	return r, nil
}

// prepare empties the lock tables and, for the seed, puts 100 in stock.
func prepare(c conf, seed bool) error {
	db, err := openSQL(c.DB, c.URL, &counter{}, 1)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clearLocks(ctx, db, c.DB); err != nil || !seed {
		return err
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM bench_stock`); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, `INSERT INTO bench_stock (id, n) VALUES (1, 100)`)
	return err
}

func getStock(c conf) (int, error) {
	db, err := openSQL(c.DB, c.URL, &counter{}, 1)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	err = db.QueryRowContext(ctx, `SELECT n FROM bench_stock WHERE id = 1`).Scan(&n)
	return n, err
}
