// Command etcd compares dlock's etcd store (etcdstore, one session per
// process) with go.etcd.io/etcd/client/v3/concurrency's Mutex (one session
// per goroutine) on one etcd server it starts itself from the etcd binary
// (Debian's etcd-server), in a temporary directory on free loopback ports.
//
//	cd bench && go run ./etcd                  # every scenario, 5 s each
//	cd bench && go run ./etcd -quick           # 1 s each
//	cd bench && go run ./etcd -scenarios onekey-50 -duration 10s
//	cd bench && go run ./etcd -scenarios seed-2x50 -rounds 3 -libs dlock,concurrency,dlock-noread
//	cd bench && go run ./etcd -open -rounds 3   # latency under offered load (openloop.go)
//
// It prints a Markdown table: throughput, latency of a whole cycle (lock,
// critical section, unlock), each goroutine's share of the critical
// sections, etcd requests per critical section (gRPC unary calls plus
// messages sent on streams, counted by interceptors), and dlock's ratios to
// the peer against the targets of issue 14. In the seed scenario dlock reads
// the stock with the grant (WithRead) and writes it with the release
// (Lease.Commit); dlock-noread (-libs) does not. It exits 1 if a critical
// section overlapped another or the seed scenario oversold.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"example.com/dlock/bench/internal/cmp"
	"go.etcd.io/etcd/api/v3/version"
)

// scenario is one workload.
type scenario struct {
	Name              string
	Procs, Goroutines int
	Seed              bool // 1 request per goroutine, stock 100
	Interleaved       bool // every library in one process, in alternating blocks (runInterleaved)
	Doc               string
}

var scenarios = []scenario{
	{Name: "uncontended", Procs: 1, Goroutines: 1, Interleaved: true, Doc: "1 goroutine, lock+unlock, the libraries in alternating blocks"},
	{Name: "onekey-50", Procs: 1, Goroutines: 50, Doc: "one key, 50 goroutines, 1 process"},
	{Name: "2x25", Procs: 2, Goroutines: 25, Doc: "one key, 2 processes × 25 goroutines"},
	{Name: "seed-2x50", Procs: 2, Goroutines: 50, Seed: true, Doc: "stock 100 in etcd, 2 processes × 50 requests, read-modify-write under the lock"},
}

func main() {
	cmp.ServeChild(childEnv, runProcess)
	var f cmp.Flags
	f.Register(flag.CommandLine)
	bin := flag.String("etcd", "/usr/bin/etcd", "etcd binary")
	libList := flag.String("libs", strings.Join(libNames, ","), "comma-separated libraries, in report order (also: "+strings.Join(extraLibs, ", ")+"); concurrency must be one")
	var o cmp.OpenFlags
	o.Register(flag.CommandLine)
	flag.Parse()
	f.Settle()
	libs, err := parseLibs(*libList)
	if err == nil && o.On {
		err = runOpen(os.Stdout, *bin, f, o, strings.Join(os.Args[1:], " "))
	} else if err == nil {
		err = run(os.Stdout, *bin, f.Dur, f.Only, f.Rounds, libs, strings.Join(os.Args[1:], " "))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/etcd:", err)
		os.Exit(1)
	}
}

// parseLibs reads -libs: known libraries, no repeats, "concurrency" among
// them (every ratio is to it).
func parseLibs(list string) ([]string, error) {
	known := append(slices.Clone(libNames), extraLibs...)
	var libs []string
	for _, l := range strings.Split(list, ",") {
		if !slices.Contains(known, l) || slices.Contains(libs, l) {
			return nil, fmt.Errorf("-libs %q: unknown or repeated library %q (known: %s)", list, l, strings.Join(known, ", "))
		}
		libs = append(libs, l)
	}
	if !slices.Contains(libs, "concurrency") {
		return nil, fmt.Errorf("-libs %q: concurrency (the peer every ratio is to) must be one", list)
	}
	return libs, nil
}

// settings is the report's line on how each library runs the seed.
const settings = "seed requests: dlock takes the lock with WithRead(stock) and writes stock-1 with Lease.Commit (the read in the " +
	"granting etcd transaction, the write in the releasing or handing-off one, guarded by ownership); dlock-noread and " +
	"concurrency read and write the stock with their own Get and Put between lock and unlock"

// run starts the server, runs the scenarios with libs and writes the
// report; args is the command line shown in it.
func run(out io.Writer, bin string, dur time.Duration, only string, rounds int, libs []string, args string) error {
	if _, err := exec.LookPath(bin); err != nil {
		return fmt.Errorf("no etcd binary at %s (install Debian's etcd-server): %w", bin, err)
	}
	srv, err := startEtcd(bin)
	if err != nil {
		return err
	}
	defer srv.stop()
	env, err := describe(srv.Endpoint, bin)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s\nduration %v per timed scenario; %s; command: cd bench && go run ./etcd %s\n\n", env, dur, settings, args)
	rows, err := cmp.PlayWith(scenarios, func(sc scenario) string { return sc.Name }, only, rounds, libs,
		func(sc scenario, lib string) (row, error) { return runScenario(srv.Endpoint, sc, lib, dur) },
		func(sc scenario, round int) ([]row, bool, error) {
			if !sc.Interleaved {
				return nil, false, nil
			}
			rows, err := runInterleaved(srv.Endpoint, sc, libs, dur, round)
			return rows, true, err
		})
	if err != nil {
		return err
	}
	bad := false
	for _, r := range rows {
		bad = bad || r.res.Overlaps > 0 || r.oversold
	}
	report(out, rows, len(libs))
	if bad {
		return fmt.Errorf("a critical section overlapped another, or the stock was oversold")
	}
	return nil
}

// row is one scenario run with one library.
type row struct {
	sc       scenario
	lib      string
	res      *result
	final    int // seed: stock left
	oversold bool
}

func runScenario(endpoint string, sc scenario, lib string, dur time.Duration) (row, error) {
	dir, err := os.MkdirTemp("", "dlockbench-etcd-marker-")
	if err != nil {
		return row{}, err
	}
	defer os.RemoveAll(dir)
	j := job{Job: cmp.Job{Lib: lib, Goroutines: sc.Goroutines, Duration: dur, Dir: dir}, Endpoint: endpoint}
	if sc.Seed {
		j.Duration = 0
		if err := putStock(endpoint, 100); err != nil {
			return row{}, err
		}
	}
	var res *result
	if sc.Procs == 1 {
		res, err = runProcess(j, func() {}, cmp.Open)
	} else {
		res, err = runProcs(j, sc.Procs)
	}
	if err != nil {
		return row{}, err
	}
	r := row{sc: sc, lib: lib, res: res}
	if sc.Seed {
		if r.final, err = getStock(endpoint); err != nil {
			return row{}, err
		}
		r.oversold = r.final < 0 || int64(100-r.final) != res.Successes
	}
	return r, nil
}

func putStock(endpoint string, n int) error {
	cli, err := newClient(endpoint, &counter{})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, stockKey, strconv.Itoa(n))
	return err
}

func getStock(endpoint string) (int, error) {
	cli, err := newClient(endpoint, &counter{})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, stockKey)
	if err != nil || len(resp.Kvs) != 1 {
		return 0, fmt.Errorf("read stock: %v %v", resp, err)
	}
	return strconv.Atoi(string(resp.Kvs[0].Value))
}

// describe names the machine and the versions.
func describe(endpoint, bin string) (string, error) {
	cli, err := newClient(endpoint, &counter{})
	if err != nil {
		return "", err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("machine: %s, %d CPUs, %s/%s; %s; etcd server %s (%s, single node, data in a temp dir); client go.etcd.io/etcd/client/v3 %s",
		cmp.CPUModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), st.Version, bin, version.Version), nil
}
