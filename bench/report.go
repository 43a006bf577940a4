package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
)

type report struct {
	When      time.Time         `json:"when"`
	Command   string            `json:"command"`
	CPU       string            `json:"cpu"`
	NumCPU    int               `json:"num_cpu"`
	Go        string            `json:"go"`
	Redis     string            `json:"redis"`
	Versions  map[string]string `json:"versions"`
	Duration  time.Duration     `json:"duration_ns"`
	Rounds    int               `json:"rounds"`
	Scenarios []scenario        `json:"scenarios"`
	Results   []*result         `json:"results"`
}

func newReport(f flags, rdb *redis.Client) *report {
	r := &report{
		When: time.Now().UTC(), Command: strings.Join(os.Args, " "), NumCPU: runtime.NumCPU(),
		Go: runtime.Version(), Versions: map[string]string{}, Duration: f.duration, Rounds: max(1, f.rounds), Scenarios: scenarios,
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				r.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if info, err := rdb.Info(context.Background(), "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				r.Redis = v
			}
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/go-redsync/redsync/v4", "github.com/bsm/redislock", "github.com/redis/go-redis/v9":
				r.Versions[d.Path] = d.Version
			}
		}
	}
	return r
}

func (r *result) opsPerSec() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Successes) / r.Wall.Seconds()
}

// fairness is the smallest per-goroutine share over the mean share.
func (r *result) fairness() float64 {
	if len(r.PerWorker) == 0 {
		return 0
	}
	var sum int64
	for _, v := range r.PerWorker {
		sum += v
	}
	if sum == 0 {
		return 0
	}
	return float64(slices.Min(r.PerWorker)) * float64(len(r.PerWorker)) / float64(sum)
}

func (r *result) perCycle(v float64) float64 {
	if r.Successes == 0 {
		return 0
	}
	return v / float64(r.Successes)
}

// serverCPU is the CPU time redis-server has used so far, user and system,
// all threads, from INFO cpu (microsecond resolution).
func serverCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	return parseServerCPU(info)
}

func parseServerCPU(info string) (time.Duration, error) {
	var total time.Duration
	var seen int
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k != "used_cpu_sys" && k != "used_cpu_user" {
			continue
		}
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu: %s: %w", k, err)
		}
		total += time.Duration(math.Round(sec*1e6)) * time.Microsecond
		seen++
	}
	if seen != 2 {
		return 0, fmt.Errorf("INFO cpu: used_cpu_sys or used_cpu_user missing")
	}
	return total, nil
}

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func printTable(w io.Writer, rep *report) {
	fmt.Fprintf(w, "machine: %d CPUs, %s; %s; redis %s; %v\n", rep.NumCPU, rep.CPU, rep.Go, rep.Redis, rep.Versions)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tlibrary\tops/s\twall\tp50\tp99\tmax\tfailures\tfinal/expected\tRT/cycle\tallocs/cycle\tsrv µs/cycle\tfairness\t")
	for _, r := range rep.Results {
		if r.Skipped != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t\t\t\t\t\t\t\t\t\n", r.Scenario, r.Lib, "n/a: "+r.Skipped)
			continue
		}
		if r.Scenario == "watchdog-10000" {
			fmt.Fprintf(tw, "%s\t%s\t-\t%s\t-\t-\t-\t%d\t%d/%d\t-\t-\t-\t-\t\n", r.Scenario, r.Lib, ms(r.Wall), r.Failures, r.Final, r.Expected)
			continue
		}
		check := fmt.Sprintf("%d/%d", r.Final, r.Expected)
		if r.Final != r.Expected {
			check += " WRONG"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%d\t%s\t%.2f\t%.1f\t%.1f\t%.2f\t\n", r.Scenario, r.Lib, r.opsPerSec(), ms(r.Wall),
			ms(r.Lat.quantile(0.5)), ms(r.Lat.quantile(0.99)), ms(time.Duration(r.Lat.Max)), r.Failures, check,
			r.perCycle(float64(r.RoundTrips)), r.perCycle(float64(r.Mallocs)), r.perCycle(float64(r.ServerCPU)/1e3), r.fairness())
	}
	_ = tw.Flush()
	for _, r := range rep.Results {
		if v, ok := r.Extra["crit_p99_uncontended_ns"]; ok && v > 0 {
			c := r.Crit.quantile(0.99)
			fmt.Fprintf(w, "%s %s: holder's critical section p99 %s with 1000 waiters vs %s alone (%.2f×)\n",
				r.Scenario, r.Lib, ms(c), ms(time.Duration(v)), float64(c)/v)
		}
		if v, ok := r.Extra["cpu_pct_of_one_core"]; ok {
			fmt.Fprintf(w, "%s %s: %d locks, %.2f%% of one core over %s, %d renewal round trips, %.0f lost\n",
				r.Scenario, r.Lib, r.Expected, v, ms(r.Wall), r.RoundTrips, r.Extra["lost"])
		}
	}
	if first := firstErrors(rep); first != "" {
		fmt.Fprint(w, first)
	}
}

func firstErrors(rep *report) string {
	var b strings.Builder
	for _, r := range rep.Results {
		if r.FirstErr != "" {
			fmt.Fprintf(&b, "%s %s: first failure: %s\n", r.Scenario, r.Lib, r.FirstErr)
		}
	}
	return b.String()
}

func violations(rep *report) []string {
	var bad []string
	for _, r := range rep.Results {
		if r.Skipped == "" && r.Final != r.Expected && r.Scenario != "watchdog-10000" {
			bad = append(bad, fmt.Sprintf("%s/%s: final %d, expected %d", r.Scenario, r.Lib, r.Final, r.Expected))
		}
	}
	return bad
}

func sortInts(a []int) { slices.Sort(a) }
