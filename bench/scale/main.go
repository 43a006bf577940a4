// Command scale measures how dlock's cost grows with the work, on each
// store (a server it starts itself, opened by URL as users open it):
//
//   - leases: one Client holding N leases under automatic renewal: the
//     store's requests and this process's CPU per renewal interval, and
//     the Go heap per held lease;
//   - waiters: N waiters on one key, each a Client of its own on one store
//     (so they wait in the store, not in one Client's queue): the store's
//     requests per handover and the time from one grant to the next;
//   - procs: P processes of -goroutines each on one key: throughput.
//
// The store's requests are counted as its server counts them (the table
// says what: Redis commands, etcd gRPC messages, ZooKeeper packets,
// PostgreSQL transactions, MariaDB statements).
//
//	cd bench && go run ./scale                                   # every store, about 8 minutes
//	cd bench && go run ./scale -stores redis -parts leases -leases 1000,10000,100000
//
// It exits 1 if a critical section overlapped another or a lease was lost.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"example.com/dlock/bench/internal/cmp"
)

// options are the command line's.
type options struct {
	stores, parts       []string
	leases, slowLeases  []int
	waiters, slowWaiter []int
	procs               []int
	lease               time.Duration
	intervals           int
	goroutines          int
	dur, settle, limit  time.Duration
}

func main() {
	cmp.ServeChild(childEnv, runProc)
	var o options
	stores := flag.String("stores", "redis,etcd,zk,pg,mysql", "stores: redis, etcd, zk, pg, mysql")
	parts := flag.String("parts", "leases,waiters,procs", "parts: leases, waiters, procs")
	leases := flag.String("leases", "1000,10000,100000", "lease counts held by one Client (Redis)")
	slow := flag.String("slow-leases", "1000,10000", "lease counts on the other stores (each lease is a key, node or row to create)")
	waiters := flag.String("waiters", "10,100,1000", "waiter counts on one key")
	slowW := flag.String("slow-waiters", "10,100,1000", "waiter counts on the SQL stores")
	procs := flag.String("procs", "2,4,8", "process counts on one key")
	flag.DurationVar(&o.lease, "lease", 15*time.Second, "leases: the lease length (renewed every third of it)")
	flag.IntVar(&o.intervals, "intervals", 2, "leases: renewal intervals measured")
	flag.IntVar(&o.goroutines, "goroutines", 4, "procs: goroutines per process")
	flag.DurationVar(&o.dur, "duration", 5*time.Second, "procs: length of each run")
	flag.DurationVar(&o.settle, "settle", 3*time.Second, "waiters: time given to the waiters to queue before the release")
	flag.DurationVar(&o.limit, "limit", 60*time.Second, "waiters: the longest the hand-overs may take")
	flag.Parse()
	o.stores, o.parts = strings.Split(*stores, ","), strings.Split(*parts, ",")
	var err error
	for _, p := range []struct {
		s   string
		dst *[]int
	}{{*leases, &o.leases}, {*slow, &o.slowLeases}, {*waiters, &o.waiters}, {*slowW, &o.slowWaiter}, {*procs, &o.procs}} {
		if *p.dst, err = ints(p.s); err != nil {
			fmt.Fprintln(os.Stderr, "bench/scale:", err)
			os.Exit(2)
		}
	}
	fmt.Printf("machine: %s, %d CPUs, %s; command: cd bench && go run ./scale %s\n\n", cmp.CPUModel(), runtime.NumCPU(), runtime.Version(), strings.Join(os.Args[1:], " "))
	bad := false
	for _, st := range o.stores {
		b, err := runStore(os.Stdout, st, o)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench/scale: %s: %v\n", st, err)
			os.Exit(2)
		}
		bad = bad || b
	}
	if bad {
		fmt.Fprintln(os.Stderr, "bench/scale: a critical section overlapped another, or a lease was lost")
		os.Exit(1)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: not a list of positive counts", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// runStore starts st's server and runs the selected parts on it, writing
// a table each. bad reports an overlap or a lost lease.
func runStore(out io.Writer, st string, o options) (bad bool, err error) {
	srv, err := start(st)
	if err != nil {
		return false, err
	}
	defer srv.stop()
	fmt.Fprintf(out, "### %s\n\nload average at the start: %s; the store's requests: %s\n\n", st, cmp.LoadAvg(), srv.counted)
	defer func() { fmt.Fprintf(out, "load average at the end: %s\n\n", cmp.LoadAvg()) }()
	for _, part := range o.parts {
		var b bool
		switch part {
		case "leases":
			b, err = leasesPart(out, srv, st, o)
		case "waiters":
			err = waitersPart(out, srv, st, o)
		case "procs":
			b, err = procsPart(out, srv, o)
		default:
			err = fmt.Errorf("unknown part %q (leases, waiters, procs)", part)
		}
		if bad = bad || b; err != nil {
			return bad, err
		}
		fmt.Fprintln(out)
	}
	return bad, nil
}

func leasesPart(out io.Writer, srv *server, st string, o options) (lost bool, err error) {
	ns := o.leases
	if st != "redis" {
		ns = o.slowLeases
	}
	fmt.Fprintf(out, "| leases held | acquire all | requests per renewal interval (%v) | round trips per interval | client CPU per interval | heap per lease | lost |\n|---|---|---|---|---|---|---|\n", o.lease/3)
	for _, n := range ns {
		r, err := measureLeases(context.Background(), srv, n, o.lease, o.intervals)
		if err != nil {
			return lost, fmt.Errorf("leases %d: %w", n, err)
		}
		lost = lost || r.Lost > 0
		trips := "same"
		if srv.trips != nil {
			trips = fmt.Sprintf("%.1f", r.TripsPerInterval)
		}
		fmt.Fprintf(out, "| %d | %v | %.1f | %s | %v | %.0f B | %d |\n", n, r.Acquire.Round(time.Millisecond), r.PerInterval, trips, r.CPUPerInterva.Round(100*time.Microsecond), r.BytesPerLease, r.Lost)
	}
	return lost, nil
}

func waitersPart(out io.Writer, srv *server, st string, o options) error {
	ns := o.waiters
	if st == "pg" || st == "mysql" {
		ns = o.slowWaiter
	}
	fmt.Fprintln(out, "\n| waiters | granted | requests per handover | grant to next grant p50 | p99 | all hand-overs |\n|---|---|---|---|---|---|")
	for _, n := range ns {
		r, err := measureWaiters(context.Background(), srv, n, o.settle, o.limit)
		if err != nil {
			return fmt.Errorf("waiters %d: %w", n, err)
		}
		fmt.Fprintf(out, "| %d | %d | %.1f | %s | %s | %v |\n", n, r.Done, r.PerRelease, cmp.MS(r.Gap.P50), cmp.MS(r.Gap.P99), r.Total.Round(time.Millisecond))
	}
	return nil
}

func procsPart(out io.Writer, srv *server, o options) (overlap bool, err error) {
	fmt.Fprintf(out, "\n| processes × %d goroutines, one key | critical sections/s | requests per critical section | client CPU per critical section | p99 cycle | failures |\n|---|---|---|---|---|---|\n", o.goroutines)
	ctx := context.Background()
	for _, p := range o.procs {
		c0, err := srv.count(ctx)
		if err != nil {
			return overlap, err
		}
		t, err := measureProcs(srv.url, p, o.goroutines, o.dur)
		if err != nil {
			return overlap, fmt.Errorf("procs %d: %w", p, err)
		}
		c1, err := srv.count(ctx)
		if err != nil {
			return overlap, err
		}
		overlap = overlap || t.Overlaps > 0
		s := t.Summarize()
		// The count includes the processes' start, warm-up and close:
		// the same few requests per process, small beside a run's.
		per := float64(c1-c0-srv.self) / float64(max(t.Ops, 1))
		cpu := t.CPU / time.Duration(max(t.Ops, 1))
		fmt.Fprintf(out, "| %d | %.0f | %.2f | %v | %s | %d |\n", p, s.OpsPerSec, per, cpu.Round(time.Microsecond/10), cmp.MS(s.P99), t.Failures)
	}
	return overlap, nil
}
