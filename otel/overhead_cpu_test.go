package dlockotel_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"example.com/dlock"
	"example.com/dlock/internal/redisserver"
	dlockotel "example.com/dlock/otel"
	"example.com/dlock/redisstore"
)

// processCPU is the CPU time this process has used, all threads, in
// nanoseconds (CLOCK_PROCESS_CPUTIME_ID: the scheduler's exact count, not
// ticks).
func processCPU(t *testing.T) time.Duration {
	var ts syscall.Timespec
	const clockProcessCPUTime = 2
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockProcessCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		t.Fatalf("clock_gettime: %v", e)
	}
	return time.Duration(ts.Nano())
}

// serverCPU is the CPU time process pid has used, the sum of its threads'
// run time in /proc/pid/task/*/schedstat (nanoseconds).
func serverCPU(t *testing.T, pid int) time.Duration {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended
		}
		ns, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
		if err != nil {
			t.Fatalf("%s: %q", f, b)
		}
		sum += time.Duration(ns)
	}
	if len(files) == 0 {
		t.Fatalf("no schedstat for pid %d", pid)
	}
	return sum
}

// overheadMode is one way of observing the Client: its options.
type overheadMode struct {
	name string
	opts []dlock.Option
}

// overheadModes are the Client without an observer (twice: the second
// measures the noise), with the OTel adapter recording metrics only,
// metrics and spans (the SDK, a batch span processor in front of a no-op
// exporter) in either shape (one span a call with the wait and the hold as
// its events, the default; three spans a call, WithChildSpans), and the
// default with 1 % of the calls traced; the SDK alone (a bare span a
// cycle, and one per event, 3 a cycle: the floor under each shape); and
// the control, an observer that burns a known CPU time per event.
func overheadModes(t *testing.T, burn time.Duration) []overheadMode {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	metricsOnly, err := dlockotel.NewObserver(dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(noop.NewTracerProvider()))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	withSpans, err := dlockotel.NewObserver(dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	withChildSpans, err := dlockotel.NewObserver(dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(tp), dlockotel.WithChildSpans())
	if err != nil {
		t.Fatal(err)
	}
	tracer := tp.Tracer("bare")
	bare := dlock.ObserverFunc(func(ctx context.Context, e dlock.Event) {
		_, sp := tracer.Start(ctx, "bare")
		sp.End()
	})
	bareOne := dlock.ObserverFunc(func(ctx context.Context, e dlock.Event) {
		if e.Type == dlock.EventReleased {
			_, sp := tracer.Start(ctx, "bare")
			sp.End()
		}
	})
	tps := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))))
	t.Cleanup(func() { _ = tps.Shutdown(context.Background()) })
	sampled, err := dlockotel.NewObserver(dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(tps))
	if err != nil {
		t.Fatal(err)
	}
	burner := dlock.ObserverFunc(func(context.Context, dlock.Event) {
		for end := processCPU(t) + burn; processCPU(t) < end; {
		}
	})
	return []overheadMode{
		{"off", nil},
		{"off (noise)", nil},
		{"metrics", []dlock.Option{dlock.WithObserver(metricsOnly)}},
		{"metrics+spans, events", []dlock.Option{dlock.WithObserver(withSpans)}},
		{"metrics+spans, child spans", []dlock.Option{dlock.WithObserver(withChildSpans)}},
		{"metrics+spans 1% sampled", []dlock.Option{dlock.WithObserver(sampled)}},
		{"SDK alone: 1 bare span", []dlock.Option{dlock.WithObserver(bareOne)}},
		{"SDK alone: 3 bare spans", []dlock.Option{dlock.WithObserver(bare)}},
		{fmt.Sprintf("control (%v/event)", burn), []dlock.Option{dlock.WithObserver(burner)}},
	}
}

// cycleCost is the per-cycle cost of one round of one mode.
type cycleCost struct {
	client, server, wall time.Duration
	allocs               float64
}

// runCycles runs n uncontended Lock+Release cycles of key on c and
// returns their cost per cycle.
func runCycles(t *testing.T, c *dlock.Client, key string, n, pid int) cycleCost {
	ctx := context.Background()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	c0, s0, w0 := processCPU(t), serverCPU(t, pid), time.Now()
	for range n {
		l, err := c.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c1, s1, w1 := processCPU(t), serverCPU(t, pid), time.Now()
	runtime.ReadMemStats(&ms1)
	d := time.Duration(n)
	return cycleCost{client: (c1 - c0) / d, server: (s1 - s0) / d, wall: w1.Sub(w0) / d,
		allocs: float64(ms1.Mallocs-ms0.Mallocs) / float64(n)}
}

// The OTel adapter's cost on Redis, measured in CPU time, which the load
// of a shared machine blurs far less than wall time: rounds of
// uncontended Lock+Release cycles, the modes interleaved (their order
// rotating), each round's cost per cycle the client's CPU time (all its
// threads: the Client, go-redis, the SDK's batch processor, GC) and the
// server's. A mode's overhead is the median over rounds of its extra
// client CPU against the same round's "off", relative to the whole cycle
// without an observer: client plus server CPU (the least over rounds; the
// round trip's work, less than its wall time, so the percentage is an
// upper bound). Metrics must cost at most 3 % plus the noise (the second
// "off" against the first); spans are reported, not bounded. Control: an observer that burns 1 µs of CPU per
// event (3 a cycle) is measured at 2.7 µs a cycle or more. About half a
// minute: DLOCK_OVERHEAD=1, without -race.
func TestObserverOverheadOnRedis(t *testing.T) {
	if os.Getenv("DLOCK_OVERHEAD") == "" {
		t.Skip("a measurement of half a minute: DLOCK_OVERHEAD=1 go test -run TestObserverOverheadOnRedis -v (without -race)")
	}
	if raceEnabled {
		t.Skip("the race detector multiplies the CPU time: run without -race")
	}
	const rounds, cycles, burn = 31, 1000, time.Microsecond
	modes := overheadModes(t, burn)
	costs := measureModes(t, modes, rounds, cycles)
	least := func(cs []cycleCost, f func(cycleCost) time.Duration) time.Duration {
		v := f(cs[0])
		for _, c := range cs[1:] {
			v = min(v, f(c))
		}
		return v
	}
	client := func(c cycleCost) time.Duration { return c.client }
	server := func(c cycleCost) time.Duration { return c.server }
	wall := func(c cycleCost) time.Duration { return c.wall }
	whole := least(costs[0], client) + least(costs[0], server)
	pct := make([]float64, len(modes))
	t.Logf("%d rounds of %d Lock+Release cycles, GOMAXPROCS %d; per cycle, the least over rounds, and the median of the rounds' differences from off", rounds, cycles, runtime.GOMAXPROCS(0))
	t.Logf("%-28s %10s %10s %10s %7s %10s %13s", "observer", "client CPU", "server CPU", "wall", "allocs", "+client", "of CPU cycle")
	for i, m := range modes {
		diffs := make([]time.Duration, rounds)
		for r := range rounds {
			diffs[r] = costs[i][r].client - costs[0][r].client
		}
		slices.Sort(diffs)
		extra := diffs[rounds/2]
		pct[i] = 100 * float64(extra) / float64(whole)
		t.Logf("%-28s %10v %10v %10v %7.1f %10v %12.2f%%", m.name, least(costs[i], client), least(costs[i], server),
			least(costs[i], wall), costs[i][rounds-1].allocs, extra, pct[i])
	}
	noise := max(pct[1], -pct[1])
	if pct[2] > 3+noise {
		t.Errorf("metrics: %.2f%% of the cycle's CPU (%v), want at most 3%% (+%.2f%% noise)", pct[2], whole, noise)
	}
	if c := len(modes) - 1; pct[c] < 100*float64(3*burn*9/10)/float64(whole) {
		t.Errorf("control: an observer burning %v an event (3 a cycle) measured at %.2f%%", burn, pct[c])
	}
}

// measureModes runs, after a warm-up, rounds of cycles Lock+Release
// cycles of each mode on a Redis server, the modes interleaved, and
// returns each mode's costs.
func measureModes(t *testing.T, modes []overheadMode, rounds, cycles int) [][]cycleCost {
	srv := redisserver.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rc.Close() })
	store, err := redisstore.New(rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	clients := make([]*dlock.Client, len(modes))
	for i, m := range modes {
		if clients[i], err = dlock.New(store, m.opts...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { clients[i].Close(context.Background()) })
		runCycles(t, clients[i], "overhead/"+strconv.Itoa(i), cycles/4, srv.PID()) // warm up
	}
	costs := make([][]cycleCost, len(modes))
	for r := range rounds {
		for j := range modes {
			i := (j + r) % len(modes)
			costs[i] = append(costs[i], runCycles(t, clients[i], "overhead/"+strconv.Itoa(i), cycles, srv.PID()))
		}
	}
	return costs
}
