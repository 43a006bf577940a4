package cmp

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// InterleaveBlocks is how many blocks each library's share of an
// interleaved scenario is cut into.
const InterleaveBlocks = 10

// Interleave runs block(i, d) for every library index i in [0, n),
// InterleaveBlocks times each, with d = dur / InterleaveBlocks, the order
// rotating from block to block and with round. The uncontended scenario
// runs this way, every library in one process with its own client, because
// this machine's load moves faster than a 5 s turn: a change in load then
// falls on every library alike instead of on whichever ran during it.
func Interleave(n int, dur time.Duration, round int, block func(i int, d time.Duration)) {
	d := dur / InterleaveBlocks
	for b := range InterleaveBlocks {
		for k := range n {
			block((k+b+round)%n, d)
		}
	}
}

// Block runs c's cycles on the calling goroutine for d and adds them to t:
// ops, latencies, failures, overlaps, and the wall and CPU time the block
// took (the whole process's CPU: a client's background work, such as
// another library's keepalives, falls on whichever block it happens in).
// It checks the time between cycles and never cancels a call in flight: a
// lock cut short by a deadline can leave its lock held (the request
// applied, the caller gone), which would stall the library's next block.
func (t *Tally) Block(c Cycle, d time.Duration) {
	ctx := context.Background()
	cpu0, t0 := CPUTime(), time.Now()
	for end := t0.Add(d); time.Now().Before(end); {
		c0 := time.Now()
		unlock, err := c.Lock(ctx, c.Key)
		if err != nil {
			t.Fail(err)
			break
		}
		if err := errors.Join(c.Critical(ctx), unlock(ctx)); err != nil {
			t.Fail(err)
			break
		}
		t.Ops++
		t.Lat = append(t.Lat, int64(time.Since(c0)))
	}
	t.Wall += time.Since(t0)
	t.CPU += CPUTime() - cpu0
	t.PerWorker = []int64{t.Ops}
}

// PlayWith is Play, except that a scenario's round is first offered to
// together, which runs every library of it at once (Interleave) and reports
// whether it did; if it did not, the libraries run in turn as in Play.
func PlayWith[S, R any](scs []S, name func(S) string, only string, rounds int, libs []string,
	run func(sc S, lib string) (R, error), together func(sc S, round int) ([]R, bool, error),
) ([]R, error) {
	var rows []R
	for _, sc := range scs {
		if !Selected(only, name(sc)) {
			continue
		}
		for round := range rounds {
			pair, done, err := together(sc, round)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name(sc), err)
			}
			if !done {
				pair, err = Alternate(libs, round, func(lib string) (R, error) {
					r, err := run(sc, lib)
					if err != nil {
						return r, fmt.Errorf("%s/%s: %w", name(sc), lib, err)
					}
					return r, nil
				})
				if err != nil {
					return nil, err
				}
			}
			rows = append(rows, pair...)
		}
	}
	return rows, nil
}
