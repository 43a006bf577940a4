// Command zk compares dlock's ZooKeeper store (zkstore, one session per
// process) with github.com/go-zookeeper/zk's own Lock (one Lock per
// goroutine on the process's connection) on one standalone ZooKeeper server
// it starts itself from Debian's zookeeper package (internal/zkserver: a
// temporary directory, free loopback ports).
//
//	cd bench && go run ./zk                  # every scenario, 5 s each
//	cd bench && go run ./zk -quick           # 1 s each
//	cd bench && go run ./zk -rounds 3        # each scenario 3 times, the libraries taking turns to go first
//	cd bench && go run ./zk -scenarios onekey-50 -duration 10s
//	cd bench && go run ./zk -open -rounds 3   # latency under offered load (openloop.go)
//
// It prints a Markdown table: throughput, latency of a whole cycle (lock,
// critical section, unlock), each goroutine's share of the critical
// sections, ZooKeeper requests per critical section (the server's
// zk_packets_received from mntr, less the seed scenario's own reads and
// writes), the next waiter's wake-up latency after a release, and dlock's
// ratios to the peer against the targets of issue 15. It exits 1 if a
// critical section overlapped another or the seed scenario oversold.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

// scenario is one workload.
type scenario struct {
	Name              string
	Procs, Goroutines int
	Seed              bool // 1 request per goroutine, stock 100
	Wake              bool // the next waiter's wake-up latency
	Interleaved       bool // every library in one process, in alternating blocks (runInterleaved)
	Doc               string
}

var scenarios = []scenario{
	{Name: "uncontended", Procs: 1, Goroutines: 1, Interleaved: true, Doc: "1 goroutine, lock+unlock, the libraries in alternating blocks"},
	{Name: "onekey-50", Procs: 1, Goroutines: 50, Doc: "one key, 50 goroutines, 1 process"},
	{Name: "2x25", Procs: 2, Goroutines: 25, Doc: "one key, 2 processes × 25 goroutines"},
	{Name: "wakeup", Procs: 1, Goroutines: 2, Wake: true, Doc: "a holder and a waiter on separate sessions: release to the waiter's grant"},
	{Name: "seed-2x50", Procs: 2, Goroutines: 50, Seed: true, Doc: "stock 100 in a znode, 2 processes × 50 requests, read-modify-write under the lock"},
}

func main() {
	cmp.ServeChild(childEnv, runProcess)
	var f cmp.Flags
	f.Register(flag.CommandLine)
	wakes := flag.Int("wakes", 100, "wake-ups measured per library and round in the wakeup scenario")
	addr := flag.String("server", "", "host:port of a running standalone ZooKeeper to use instead of starting one (it must allow the mntr four-letter word)")
	warmup := flag.Duration("warmup", 2*time.Second, "untimed uncontended lock+unlock per library before the first round, so that the server's JVM is warm for whichever library goes first (0: none)")
	var o cmp.OpenFlags
	o.Register(flag.CommandLine)
	flag.Parse()
	f.Settle()
	cfg := config{dur: f.Dur, only: f.Only, rounds: f.Rounds, wakes: max(*wakes, 1), server: *addr, warmup: *warmup, args: strings.Join(os.Args[1:], " ")}
	play := run
	if o.On {
		play = func(out io.Writer, cfg config) error { return runOpen(out, cfg, o) }
	}
	if err := play(os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench/zk:", err)
		os.Exit(1)
	}
}

// config is one run's settings; args is the command line shown in the report.
type config struct {
	dur           time.Duration
	only          string
	rounds, wakes int
	warmup        time.Duration // untimed uncontended run per library before round 1
	server        string        // a running server's address; "" starts one
	args          string
}

// run starts the server, runs the scenarios and writes the report.
func run(out io.Writer, cfg config) error {
	srv := &server{Addr: cfg.server}
	if cfg.server == "" {
		var err error
		if srv, err = startZK(); err != nil {
			return err
		}
		defer srv.stop()
	}
	fmt.Fprintf(out, "%s\nduration %v per timed scenario, after a %v untimed uncontended warm-up per library; command: cd bench && go run ./zk %s\n\n", describe(srv), cfg.dur, cfg.warmup, cfg.args)
	if err := warmUp(srv, cfg); err != nil {
		return err
	}
	rows, err := cmp.PlayWith(scenarios, func(sc scenario) string { return sc.Name }, cfg.only, cfg.rounds, libNames,
		func(sc scenario, lib string) (row, error) { return runScenario(srv, sc, lib, cfg) },
		func(sc scenario, round int) ([]row, bool, error) {
			if !sc.Interleaved {
				return nil, false, nil
			}
			rows, err := runInterleaved(srv, sc, cfg.dur, round)
			return rows, true, err
		})
	if err != nil {
		return err
	}
	bad := false
	for _, r := range rows {
		bad = bad || r.res.Overlaps > 0 || r.oversold
	}
	report(out, rows)
	if bad {
		return fmt.Errorf("a critical section overlapped another, or the stock was oversold")
	}
	return nil
}

// warmUp runs the uncontended scenario untimed for cfg.warmup per library:
// the server's JVM compiles its hot paths in the first seconds, and without
// it the library that goes first in round 1 is measured on a cold server
// (0.65x in the 05:35 run's first round, parity in the next two).
func warmUp(srv *server, cfg config) error {
	if cfg.warmup <= 0 {
		return nil
	}
	w := cfg
	w.dur = cfg.warmup
	for _, lib := range libNames {
		if _, err := runScenario(srv, scenarios[0], lib, w); err != nil {
			return fmt.Errorf("warm-up of %s: %w", lib, err)
		}
	}
	return nil
}

// describe names the machine and the versions.
func describe(srv *server) string {
	client := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/go-zookeeper/zk" {
				client = d.Version
			}
		}
	}
	where := fmt.Sprintf("Debian, standalone, tickTime %v, data in a temp dir", srv.tick)
	if srv.e == nil {
		where = "given with -server " + srv.Addr
	}
	return fmt.Sprintf("machine: %s, %d CPUs, %s/%s, load %s; %s; ZooKeeper server %s (%s); client github.com/go-zookeeper/zk %s",
		cmp.CPUModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, loadAvg(), runtime.Version(), srv.version(), where, client)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
