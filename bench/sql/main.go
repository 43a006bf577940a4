// Command sql compares dlock's SQL lease stores with the lock libraries
// people use on the same database server, in one run: on PostgreSQL
// (pgstore) with cirello.io/pglock and with a JdbcLockRegistry-style lease
// table polled every 100 ms (hand-written, as Spring Integration does it),
// and on MariaDB (mysqlstore) with the same polling table. It starts the
// servers itself (internal/pgserver, internal/mysqlserver: Debian's
// postgresql 15 and mariadb-server, temporary directories, free loopback
// ports).
//
//	cd bench && go run ./sql                        # both databases, every scenario, 5 s each
//	cd bench && go run ./sql -rounds 3              # 3 rounds, the libraries taking turns to go first
//	cd bench && go run ./sql -quick                 # 1 s scenarios
//	cd bench && go run ./sql -db pg -scenarios onekey-50,wakeup
//	cd bench && go run ./sql -open -rounds 3        # latency under offered load (openloop.go)
//
// It prints a Markdown table per database: throughput, latency of a whole
// cycle (lock, critical section, unlock), each goroutine's share, database
// round trips and statements per critical section (counted on the client's
// connections: a round trip is a write after a read, statements are parsed
// from the protocol), client CPU, and dlock's ratios to each peer against
// the targets of issue 16. It exits 1 if a critical section overlapped
// another or the seed scenario oversold. -libs also takes diagnostics that
// "all" leaves out: pglock-hb (pglock with its heartbeat), store (dlock's
// store without the Client), dlock-sqldb and store-sqldb (pgstore on
// database/sql), dlock-session (MariaDB's GET_LOCK session lock) and none
// (no lock: the negative control).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

// scenario is one workload.
type scenario struct {
	Name              string
	Procs, Goroutines int
	Seed              bool // 1 request per goroutine, stock 100 in bench_stock
	Wakeup            bool
	Interleaved       bool // the libraries alternate in short blocks in one process
	Doc               string
}

var scenarios = []scenario{
	{Name: "uncontended", Procs: 1, Goroutines: 1, Interleaved: true, Doc: "1 goroutine, lock+unlock, the libraries alternating in 10 blocks each"},
	{Name: "onekey-50", Procs: 1, Goroutines: 50, Doc: "one key, 50 goroutines, 1 process"},
	{Name: "2x25", Procs: 2, Goroutines: 25, Doc: "one key, 2 processes × 25 goroutines"},
	{Name: "wakeup", Procs: 1, Goroutines: 1, Wakeup: true, Doc: "a holder releases, the other client's waiter wakes: start of release to Lock returning"},
	{Name: "seed-2x50", Procs: 2, Goroutines: 50, Seed: true, Doc: "stock 100 in a table, 2 processes × 50 requests, read-modify-write under the lock"},
}

// options are the command line's.
type options struct {
	dbs       []string
	dur, cap  time.Duration
	only      string
	libs      string
	rounds    int
	samples   int
	pgURL     string
	mysqlDSN  string
	args      string
	wakeLimit time.Duration
}

func main() {
	cmp.ServeChild(childEnv, runProcess)
	var o options
	dbs := flag.String("db", "pg,mysql", "databases: pg, mysql or both")
	flag.DurationVar(&o.dur, "duration", 5*time.Second, "length of each timed scenario and of the wake-up scenario")
	quick := flag.Bool("quick", false, "1 s scenarios, seed capped at 10 s")
	flag.DurationVar(&o.cap, "seedcap", 30*time.Second, "the longest a seed scenario may run (pglock's waiters sleep a lease)")
	flag.StringVar(&o.only, "scenarios", "all", "comma-separated scenarios, or all")
	flag.StringVar(&o.libs, "libs", "all", "comma-separated libraries (dlock, pglock, poll), or all")
	flag.IntVar(&o.rounds, "rounds", 1, "run every scenario this many times, the libraries taking turns to go first")
	flag.IntVar(&o.samples, "samples", 200, "wake-up samples at most per library and round")
	flag.StringVar(&o.pgURL, "pg-url", "", "use this PostgreSQL server instead of starting one (postgres://...)")
	flag.StringVar(&o.mysqlDSN, "mysql-dsn", "", "use this MariaDB/MySQL server instead of starting one (go-sql-driver DSN)")
	var open cmp.OpenFlags
	open.Register(flag.CommandLine)
	flag.Parse()
	if *quick {
		o.dur, o.cap = time.Second, 10*time.Second
	}
	o.dbs = strings.Split(*dbs, ",")
	o.rounds = max(o.rounds, 1)
	o.args = strings.Join(os.Args[1:], " ")
	play := run
	if open.On {
		play = func(out io.Writer, o options) error { return runOpen(out, o, open) }
	}
	if err := play(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/sql:", err)
		os.Exit(1)
	}
}

// run runs every selected database's scenarios and writes the report.
func run(out io.Writer, o options) error {
	fmt.Fprintf(out, "%s\ncommand: cd bench && go run ./sql %s\n%v per timed scenario; seed capped at %v\n\n", machine(), o.args, o.dur, o.cap)
	bad := false
	for _, db := range o.dbs {
		b, err := runDB(out, db, o)
		if err != nil {
			return fmt.Errorf("%s: %w", db, err)
		}
		bad = bad || b
	}
	if bad {
		return fmt.Errorf("a critical section overlapped another, or the stock was oversold")
	}
	return nil
}
