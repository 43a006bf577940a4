package main

import (
	"context"
	"os"
	"time"

	"example.com/dlock"
	"example.com/dlock/bench/internal/cmp"
)

const childEnv = "DLOCKBENCH_SCALE_JOB"

// procJob is one process of the processes-on-one-key part.
type procJob struct {
	URL        string        `json:"url"`
	Goroutines int           `json:"goroutines"`
	Duration   time.Duration `json:"duration"`
	Dir        string        `json:"dir"` // the overlap marker's, shared by the processes
}

// runProc opens the store, one Client, and runs j.Goroutines goroutines on
// one key (lock, the overlap marker, unlock) for j.Duration.
func runProc(j procJob, ready func(), gate <-chan struct{}) (*cmp.Tally, error) {
	ctx := context.Background()
	m, closeStore, err := openStore(ctx, j.URL)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	c, err := dlock.New(m)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close(ctx) }()
	lock := func(ctx context.Context, key string) (func(context.Context) error, error) {
		l, err := c.Lock(ctx, key)
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	}
	if err := cmp.WarmUp(ctx, lock, os.Getpid()); err != nil {
		return nil, err
	}
	ready()
	<-gate
	rctx, stop := context.WithTimeout(ctx, j.Duration)
	defer stop()
	total := &cmp.Tally{}
	cmp.Workers(total, j.Goroutines, func(int) *cmp.Tally {
		var t cmp.Tally
		t.Loop(rctx, cmp.Cycle{Lock: lock, Key: "scale-onekey", Critical: func(context.Context) error { defer t.Enter(j.Dir)(); return nil }})
		return &t
	}, total.Merge)
	return total, nil
}

// measureProcs runs procs processes of goroutines each on one key for dur
// and returns their merged tally.
func measureProcs(url string, procs, goroutines int, dur time.Duration) (*cmp.Tally, error) {
	dir, err := os.MkdirTemp("", "dlockbench-scale-marker-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	total := &cmp.Tally{}
	j := procJob{URL: url, Goroutines: goroutines, Duration: dur, Dir: dir}
	err = cmp.RunProcs(childEnv, procs, func(int) procJob { return j }, nil, func(t *cmp.Tally) { total.Merge(t) })
	return total, err
}
