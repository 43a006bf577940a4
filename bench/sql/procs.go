package main

import "example.com/dlock/bench/internal/cmp"

// runProcs runs j in procs child processes (this program again), started
// together once every one is ready, and merges their results.
func runProcs(j job, procs int) (*result, error) {
	total := &result{}
	err := cmp.RunProcs(childEnv, procs, func(i int) job { j.Proc = i; return j }, nil, total.merge)
	return total, err
}
