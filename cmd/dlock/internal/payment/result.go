package payment

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"example.com/dlock/cmd/dlock/internal/inventory"
)

// Verdict kinds, worst first.
const (
	KindDoubleCharged = "double_charged" // an order was charged more than once
	KindUncharged     = "uncharged"      // an order was not charged at all
	KindFailed        = "failed_requests"
	KindCorrect       = "correct"
)

// Result is what one strategy did: the provider's counts and the
// client's.
type Result struct {
	Strategy       string             `json:"strategy"`
	Orders         int                `json:"orders"`
	Requests       int                `json:"requests"`
	ChargeAttempts int                `json:"charge_attempts"`
	Charges        int                `json:"charges"`
	Duplicates     int                `json:"duplicates"`
	DoubleCharged  int                `json:"double_charged_orders"`
	Uncharged      int                `json:"uncharged_orders"`
	Replays        int                `json:"replays"`
	Conflicts      int                `json:"conflicts"`
	Dropped        int                `json:"dropped"`
	Retried5xx     int                `json:"answers_5xx"`
	Takeovers      int                `json:"takeovers"`
	Errors         int                `json:"errors"`
	Wall           inventory.Duration `json:"wall_ms"`
	Kind           string             `json:"verdict_kind"`
	Verdict        string             `json:"verdict"`
	SampleError    string             `json:"sample_error,omitempty"`
}

func summarise(strategy string, orders []string, p *Provider, t *tally, wall time.Duration) Result {
	attempts, charges := p.counts(orders)
	r := Result{Strategy: strategy, Orders: len(orders), Wall: inventory.Duration(wall)}
	for _, o := range orders {
		r.ChargeAttempts += attempts[o]
		r.Charges += charges[o]
		switch n := charges[o]; {
		case n == 0:
			r.Uncharged++
		case n > 1:
			r.DoubleCharged++
			r.Duplicates += n - 1
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r.Requests, r.Replays, r.Conflicts, r.Dropped, r.Retried5xx, r.Errors, r.SampleError =
		t.requests, t.replays, t.conflicts, t.dropped, t.failed, t.errors, t.sample
	return r
}

// judge sets the verdict: the worst thing that happened.
func (r *Result) judge() {
	switch {
	case r.DoubleCharged > 0:
		r.Kind = KindDoubleCharged
		r.Verdict = fmt.Sprintf("✘ charged twice: %d of %d orders, %d charges", r.DoubleCharged, r.Orders, r.Charges)
	case r.Uncharged > 0:
		r.Kind = KindUncharged
		r.Verdict = fmt.Sprintf("✘ %d of %d orders not charged", r.Uncharged, r.Orders)
	case r.Errors > 0:
		r.Kind = KindFailed
		r.Verdict = fmt.Sprintf("~ charged once each, but %d requests failed", r.Errors)
	default:
		r.Kind = KindCorrect
		r.Verdict = fmt.Sprintf("✔ correct: %d orders, %d charges", r.Orders, r.Charges)
		if r.Takeovers > 0 {
			r.Verdict += fmt.Sprintf(" (%d attempts: %d taken over after the crash)", r.ChargeAttempts, r.Takeovers)
		}
	}
}

// WriteTable prints the results as a table, then each verdict.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\torders\trequests\tattempts\tcharges\tduplicates\treplays\t409s\t5xx\tdropped\ttakeovers\terrors\ttime\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t\n", r.Strategy, r.Orders, r.Requests,
			r.ChargeAttempts, r.Charges, r.Duplicates, r.Replays, r.Conflicts, r.Retried5xx, r.Dropped, r.Takeovers, r.Errors, r.Wall)
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
