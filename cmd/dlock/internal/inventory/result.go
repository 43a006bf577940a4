package inventory

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Verdict kinds, worst first.
const (
	KindLostUpdates = "lost_updates"
	KindUnsafe      = "unsafe" // no update lost this time, but the lock did not exclude
	KindDeadlock    = "deadlock"
	KindFailed      = "failed_requests"
	KindCorrect     = "correct"
)

// Result is what one strategy did under one scenario.
type Result struct {
	Strategy      string   `json:"strategy"`
	Scenario      string   `json:"scenario"`
	Requests      int      `json:"requests"`
	Successes     int      `json:"successes"`
	LockFailures  int      `json:"lock_failures"`
	OutOfStock    int      `json:"out_of_stock"`
	Errors        int      `json:"errors"`
	FinalStock    int64    `json:"final_stock"`
	LostUpdates   int      `json:"lost_updates"`   // successes − (initial − final)
	Oversold      int      `json:"oversold"`       // sales beyond the initial stock, or stock below zero
	Overlaps      int      `json:"overlaps"`       // requests that found another inside the critical section
	ReleasedOther int      `json:"released_other"` // releases that deleted another request's lock
	LeaseLost     int      `json:"lease_lost"`     // holders whose lease had ended before they released
	P50           Duration `json:"p50_ms"`
	P99           Duration `json:"p99_ms"`
	Wall          Duration `json:"wall_ms"`
	FirstSale     Duration `json:"first_sale_ms"` // first sale answered, since the first request (crash: since the crash)
	Kind          string   `json:"verdict_kind"`
	Verdict       string   `json:"verdict"`
	SampleError   string   `json:"sample_error,omitempty"`
}

// Duration marshals as milliseconds with a fraction.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(float64(time.Duration(d).Microseconds()) / 1000)
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

func (d Duration) String() string {
	t := time.Duration(d)
	switch {
	case t >= 10*time.Second:
		return t.Round(100 * time.Millisecond).String()
	case t >= time.Second:
		return t.Round(10 * time.Millisecond).String()
	}
	return t.Round(100 * time.Microsecond).String()
}

// summarise counts answers; first is when the first sale was answered
// (negative: never).
func summarise(strategy string, sc Scenario, answers []Answer, lat []time.Duration, first time.Duration, final int64, wall time.Duration) Result {
	r := Result{Strategy: strategy, Scenario: sc.Name, Requests: len(answers), FinalStock: final,
		P50: Duration(quantile(lat, 0.50)), P99: Duration(quantile(lat, 0.99)), Wall: Duration(wall),
		FirstSale: Duration(max(first, 0))}
	for _, a := range answers {
		switch a.Outcome {
		case Sold:
			r.Successes++
		case OutOfStock:
			r.OutOfStock++
		case LockFailed:
			r.LockFailures++
		default:
			r.Errors++
			if r.SampleError == "" {
				r.SampleError = a.Message
			}
		}
		r.Overlaps += btoi(a.Overlap)
		r.ReleasedOther += btoi(a.ReleasedOther)
		r.LeaseLost += btoi(a.LeaseLost)
	}
	r.LostUpdates = r.Successes - int(InitialStock-final)
	r.Oversold = max(0, r.Successes-InitialStock, int(-final))
	r.Kind, r.Verdict = verdict(r, sc)
	return r
}

// verdict judges a result: lost updates (or overselling) first, then a
// lock that did not exclude (two requests inside at once, or a release of
// another request's lock) or a strategy that cannot exclude across
// instances (never "correct", however lucky the run), then a deadlock (a crash left a lock nobody
// could take), then failed requests.
func verdict(r Result, sc Scenario) (kind, text string) {
	switch {
	case r.LostUpdates > 0 || r.Oversold > 0:
		t := fmt.Sprintf("LOST UPDATES: %d sale(s) not reflected in the stock", r.LostUpdates)
		if r.Oversold > 0 {
			t += fmt.Sprintf(", %d oversold", r.Oversold)
		}
		return KindLostUpdates, t + overlapNote(r)
	case r.ReleasedOther > 0 || r.Overlaps > 0:
		return KindUnsafe, "UNSAFE: no sale lost this time, but the lock did not exclude" + overlapNote(r)
	case !excludesAcrossInstances(r.Strategy):
		// A quiet run (the crash scenario's spaced requests) proves nothing
		// about a strategy that has no lock shared by the instances.
		return KindUnsafe, "UNSAFE: no lock shared by the instances; nothing was lost this time only because no two requests overlapped (the contention scenario shows the lost updates)"
	case sc.Crash && r.Successes == 0 && r.LockFailures > 0:
		return KindDeadlock, fmt.Sprintf("DEADLOCK: the crashed holder's lock never expired; %d of %d requests refused", r.LockFailures, r.Requests)
	case r.LockFailures > 0 || r.Errors > 0:
		t := fmt.Sprintf("failed requests: %d could not get the lock", r.LockFailures)
		if sc.Crash {
			t = fmt.Sprintf("recovered: first sale %s after the crash; %d refused while the dead holder's lease ran", r.FirstSale, r.LockFailures)
		}
		if r.Errors > 0 {
			t += fmt.Sprintf(", %d errors (%s)", r.Errors, r.SampleError)
		}
		return KindFailed, t + "; stock consistent"
	}
	t := fmt.Sprintf("correct: %d sold, stock %d, every request served", r.Successes, r.FinalStock)
	if sc.Crash {
		t += fmt.Sprintf(", first sale %s after the crash", r.FirstSale)
	}
	return KindCorrect, t
}

// excludesAcrossInstances reports whether strategy has a lock that the
// service's instances share: nolock has none, and local's mutex lives in one
// process.
func excludesAcrossInstances(strategy string) bool {
	return strategy != "nolock" && strategy != "local"
}

func overlapNote(r Result) string {
	var notes []string
	if r.ReleasedOther > 0 {
		notes = append(notes, fmt.Sprintf("deleted another holder's lock %d time(s)", r.ReleasedOther))
	}
	if r.Overlaps > 0 {
		notes = append(notes, fmt.Sprintf("%d overlapping critical sections", r.Overlaps))
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, ", ") + ")"
}

// WriteTable prints the comparison table and one verdict line per strategy.
// It returns the first error of w.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tok\tlock fail\tsold out\terrors\tfinal\tlost\toversold\toverlaps\tfreed other\tp50\tp99\twall\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", r.Strategy, r.Successes,
			r.LockFailures, r.OutOfStock, r.Errors, r.FinalStock, r.LostUpdates, r.Oversold, r.Overlaps,
			r.ReleasedOther, r.P50, r.P99, r.Wall)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	width := 0
	for _, r := range rs {
		width = max(width, len(r.Strategy))
	}
	for _, r := range rs {
		m, _ := Mark(r.Kind)
		fmt.Fprintf(w, "%-*s %s %s\n", width, r.Strategy, m, r.Verdict)
	}
	return nil
}
