package ratedemo

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"example.com/dlock/cmd/dlock/internal/inventory"
)

// Verdict kinds.
const (
	KindOverLimit = "over_limit" // more admitted than the limit allows in the burst's time
	KindFailed    = "failed_requests"
	KindCorrect   = "correct"
)

// Result is what one strategy admitted.
type Result struct {
	Strategy    string             `json:"strategy"`
	Requests    int                `json:"requests"`
	Admitted    int                `json:"admitted"`
	Denied      int                `json:"denied"`
	PerInstance []int              `json:"admitted_per_instance"`
	SkewMS      []int64            `json:"clock_offsets_ms"`
	Allowed     int                `json:"limit_allows"`
	Errors      int                `json:"errors"`
	Wall        inventory.Duration `json:"wall_ms"`
	Kind        string             `json:"verdict_kind"`
	Verdict     string             `json:"verdict"`
	SampleError string             `json:"sample_error,omitempty"`
}

// LimitAllows is the most a limit of Rate per Period with a burst of Rate
// admits to requests that all arrive within wall: the burst, and one more
// per emission interval elapsed.
func LimitAllows(wall time.Duration) int { return Rate + int(wall/(Period/Rate)) }

func summarise(strategy string, cfg Config, insts []*instance, admitted []int, errs []error, wall time.Duration) Result {
	r := Result{Strategy: strategy, Requests: len(errs), PerInstance: admitted,
		Allowed: LimitAllows(wall), Wall: inventory.Duration(wall)}
	for _, in := range insts {
		r.SkewMS = append(r.SkewMS, in.offset.Milliseconds())
	}
	for _, n := range admitted {
		r.Admitted += n
	}
	for _, err := range errs {
		if err != nil {
			r.Errors++
			if r.SampleError == "" {
				r.SampleError = err.Error()
			}
		}
	}
	r.Denied = r.Requests - r.Admitted - r.Errors
	r.judge()
	return r
}

// judge sets the verdict.
func (r *Result) judge() {
	switch {
	case r.Admitted > r.Allowed:
		r.Kind = KindOverLimit
		r.Verdict = fmt.Sprintf("✘ over the limit: %d of %d admitted; %d a second allows %d in %v",
			r.Admitted, r.Requests, Rate, r.Allowed, r.Wall)
	case r.Errors > 0:
		r.Kind = KindFailed
		r.Verdict = fmt.Sprintf("~ within the limit, but %d requests failed", r.Errors)
	default:
		r.Kind = KindCorrect
		r.Verdict = fmt.Sprintf("✔ within the limit: %d of %d admitted", r.Admitted, r.Requests)
	}
}

// WriteTable prints the results as a table, then each verdict.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\trequests\tadmitted\tper instance\tdenied\tlimit allows\tclock offsets\terrors\ttime\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%s\t%d\t%v\t\n", r.Strategy, r.Requests, r.Admitted,
			ints(r.PerInstance, ""), r.Denied, r.Allowed, ints(r.SkewMS, "ms"), r.Errors, r.Wall)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	vw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for _, r := range rs {
		fmt.Fprintf(vw, "%s\t%s\n", r.Strategy, r.Verdict)
	}
	return vw.Flush()
}

// ints joins numbers with "+" (per instance) or "/" with a unit (offsets).
func ints[T int | int64](xs []T, unit string) string {
	sep := "+"
	if unit != "" {
		sep = "/"
	}
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += sep
		}
		if unit != "" && x > 0 {
			s += "+"
		}
		s += fmt.Sprintf("%d%s", x, unit)
	}
	return s
}
