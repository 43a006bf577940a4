package cmp

import (
	"context"
	"errors"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

const testEnv = "DLOCKBENCH_CMP_TEST_JOB"

type testJob struct{ Proc, Ops int }

func TestMain(m *testing.M) {
	ServeChild(testEnv, func(j testJob, ready func(), gate <-chan struct{}) (*Tally, error) {
		ready()
		<-gate
		return &Tally{Ops: int64(j.Ops), PerWorker: []int64{int64(j.Proc)}}, nil
	})
	os.Exit(m.Run())
}

// TestRunProcs runs three children of this test binary: each gets its own
// job, ready is called once, and the results merge in order.
func TestRunProcs(t *testing.T) {
	readies := 0
	var total Tally
	err := RunProcs(testEnv, 3, func(i int) testJob { return testJob{Proc: i, Ops: 10 + i} }, func() { readies++ }, total.Merge)
	if err != nil {
		t.Fatal(err)
	}
	if readies != 1 || total.Ops != 33 || len(total.PerWorker) != 3 || total.PerWorker[2] != 2 {
		t.Errorf("readies %d, merged %+v", readies, total)
	}
}

// spin is a critical section long enough for another goroutine to enter
// it if nothing excludes it.
func spin(context.Context) error {
	for range 20 {
		runtime.Gosched()
	}
	return nil
}

// loopOn runs 4 workers of lock for 200 ms and returns the merged tally.
func loopOn(t *testing.T, lock LockFn) Tally {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	total := &Tally{}
	Workers(total, 4, func(int) *Tally {
		var w Tally
		w.Loop(ctx, Cycle{Lock: lock, Key: "k", Critical: func(ctx context.Context) error {
			defer w.Enter(dir)()
			return spin(ctx)
		}})
		return &w
	}, total.Merge)
	return *total
}

// TestLoopOverlaps: with a mutex the marker sees no overlap; with no lock
// (the negative control) it does.
func TestLoopOverlaps(t *testing.T) {
	var mu sync.Mutex
	locked := loopOn(t, func(context.Context, string) (func(context.Context) error, error) {
		mu.Lock()
		return func(context.Context) error { mu.Unlock(); return nil }, nil
	})
	if locked.Overlaps != 0 || locked.Failures != 0 || locked.Ops == 0 || len(locked.PerWorker) != 4 {
		t.Errorf("with a mutex: %d ops, %d overlaps, %d failures, %d workers", locked.Ops, locked.Overlaps, locked.Failures, len(locked.PerWorker))
	}
	none := loopOn(t, func(context.Context, string) (func(context.Context) error, error) {
		return func(context.Context) error { return nil }, nil
	})
	if none.Overlaps == 0 {
		t.Errorf("no lock, and %d ops saw no overlap", none.Ops)
	}
}

// TestLoopFailures: a seed request's lock error is a failure unless Cut
// excuses it; a timed run's lock error at its end is not.
func TestLoopFailures(t *testing.T) {
	fail := func(context.Context, string) (func(context.Context) error, error) { return nil, errors.New("refused") }
	var seed Tally
	seed.Loop(context.Background(), Cycle{Lock: fail, Once: true})
	if seed.Failures != 1 || seed.FirstErr != "refused" {
		t.Errorf("seed: %+v", seed)
	}
	var cut Tally
	cuts := 0
	cut.Loop(context.Background(), Cycle{Lock: fail, Once: true, Cut: func(context.Context, time.Time) bool { cuts++; return true }})
	if cut.Failures != 0 || cuts != 1 {
		t.Errorf("excused by Cut: %d failures, %d cuts", cut.Failures, cuts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var timed Tally
	timed.Loop(ctx, Cycle{Lock: func(ctx context.Context, _ string) (func(context.Context) error, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	if timed.Failures != 0 {
		t.Errorf("a wait the end cut counted as a failure: %+v", timed)
	}
}

func TestSummarize(t *testing.T) {
	tl := Tally{Ops: 10, Wall: 2 * time.Second, PerWorker: []int64{2, 8}}
	for i := range 100 {
		tl.Lat = append(tl.Lat, int64(100-i)*int64(time.Millisecond))
	}
	s := tl.Summarize()
	if s.OpsPerSec != 5 || s.P50 != 50*time.Millisecond || s.P99 != 99*time.Millisecond || s.MinShare != 2 || s.Mean != 5 {
		t.Errorf("%+v", s)
	}
	if (&Tally{}).Summarize() != (Summary{}) {
		t.Error("an empty tally has figures")
	}
}

func TestAlternate(t *testing.T) {
	var order []string
	rows, err := Alternate([]string{"a", "b", "c"}, 1, func(lib string) (string, error) {
		order = append(order, lib)
		return lib + "!", nil
	})
	if err != nil || len(rows) != 3 || rows[0] != "a!" || rows[2] != "c!" || order[0] != "b" {
		t.Errorf("rows %v, order %v, err %v", rows, order, err)
	}
}
