package main

import "example.com/dlock/bench/internal/cmp"

// runProcs runs j in procs child processes (this program again), started
// together once every one is ready, and merges their results.
func runProcs(j job, procs int) (*result, error) {
	jobs := make([]job, procs)
	for i := range jobs {
		jobs[i] = j
		jobs[i].Proc = i
	}
	rs, err := cmp.RunProcs[job, result](childEnv, jobs, nil)
	if err != nil {
		return nil, err
	}
	total := &result{}
	for i := range rs {
		total.merge(&rs[i])
	}
	return total, nil
}
