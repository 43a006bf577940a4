package cmp

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Summary is the figures every table shows of a tally.
type Summary struct {
	OpsPerSec      float64
	P50, P99       time.Duration
	MinShare, Mean float64 // the least and the mean critical sections per worker
}

// Summarize computes t's summary; with no ops, no latencies or no workers
// the figures concerned are 0.
func (t *Tally) Summarize() Summary {
	var s Summary
	if t.Wall > 0 {
		s.OpsPerSec = float64(t.Ops) / t.Wall.Seconds()
	}
	lat := slices.Clone(t.Lat)
	slices.Sort(lat)
	if len(lat) > 0 {
		s.P50 = time.Duration(lat[(len(lat)-1)*50/100])
		s.P99 = time.Duration(lat[(len(lat)-1)*99/100])
	}
	if len(t.PerWorker) > 0 {
		s.MinShare = float64(slices.Min(t.PerWorker))
		var sum int64
		for _, v := range t.PerWorker {
			sum += v
		}
		s.Mean = float64(sum) / float64(len(t.PerWorker))
	}
	return s
}

// MS formats d in milliseconds with two decimals ("1.25 ms").
func MS(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// Yes is a table's "met" cell: yes, or a bold no.
func Yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// Selected reports whether name is in the comma-separated list, or list is
// "all".
func Selected(list, name string) bool {
	return list == "all" || strings.Contains(","+list+",", ","+name+",")
}

// Alternate runs one round of a scenario with every library, the first
// library to run turning with round, and returns the rows in libs' order.
// It stops at the first error.
func Alternate[R any](libs []string, round int, run func(lib string) (R, error)) ([]R, error) {
	rows := make([]R, len(libs))
	for k := range libs {
		i := (k + round) % len(libs) // who goes first alternates
		r, err := run(libs[i])
		if err != nil {
			return nil, err
		}
		rows[i] = r
	}
	return rows, nil
}

// CPUModel is /proc/cpuinfo's first model name, or "unknown CPU".
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "model name") {
			if _, v, ok := strings.Cut(l, ":"); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown CPU"
}

// Play runs every scenario in scs whose name (name) is Selected in only,
// rounds times, each round with every library (Alternate), and returns the
// rows in that order. It stops at the first error, prefixed with
// "scenario/library: ".
func Play[S, R any](scs []S, name func(S) string, only string, rounds int, libs []string, run func(sc S, lib string) (R, error)) ([]R, error) {
	return PlayWith(scs, name, only, rounds, libs, run, func(S, int) ([]R, bool, error) { return nil, false, nil })
}

// LoadAvg is the machine's 1, 5 and 15 minute load averages.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
