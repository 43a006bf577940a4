package inventory

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func answers(n int, a Answer) []Answer {
	out := make([]Answer, n)
	for i := range out {
		out[i] = a
	}
	return out
}

func lats(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * time.Millisecond
	}
	return out
}

func TestVerdict(t *testing.T) {
	sold := Answer{Outcome: Sold}
	refused := Answer{Outcome: LockFailed}
	contention, _ := Scenarios("contention", 0, 0)
	crash, _ := Scenarios("crash", 0, 0)
	cases := []struct {
		name     string
		sc       Scenario
		answers  []Answer
		final    int64
		kind     string
		lost     int
		oversold int
	}{
		{"all sold, stock 0", contention, answers(100, sold), 0, KindCorrect, 0, 0},
		// 100 sales but the stock only went down by 60: 40 updates lost.
		{"lost updates", contention, answers(100, sold), 40, KindLostUpdates, 40, 0},
		{"half refused, stock consistent", contention, append(answers(50, sold), answers(50, refused)...), 50, KindFailed, 0, 0},
		{"more sales than stock", contention, answers(120, sold), 0, KindLostUpdates, 20, 20},
		{"stock below zero", contention, answers(100, sold), -3, KindLostUpdates, -3, 3},
		{"crash, nobody served", crash, answers(20, refused), 100, KindDeadlock, 0, 0},
		{"crash, recovered", crash, append(answers(5, refused), answers(15, sold)...), 85, KindFailed, 0, 0},
		{"no crash, nobody served is not a deadlock", contention, answers(20, refused), 100, KindFailed, 0, 0},
		{"freed another's lock", contention, append(answers(3, sold), Answer{Outcome: Sold, ReleasedOther: true}), 96, KindUnsafe, 0, 0},
		{"overlap without a lost update", contention, append(answers(3, sold), Answer{Outcome: Sold, Overlap: true}), 96, KindUnsafe, 0, 0},
		{"errors count as failed", contention, append(answers(99, sold), Answer{Outcome: Failed, Message: "boom"}), 1, KindFailed, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := summarise("x", tc.sc, tc.answers, lats(len(tc.answers)), 300*time.Millisecond, tc.final, time.Second)
			if r.Kind != tc.kind || r.LostUpdates != tc.lost || r.Oversold != tc.oversold {
				t.Fatalf("kind %s lost %d oversold %d, want %s %d %d (verdict %q)",
					r.Kind, r.LostUpdates, r.Oversold, tc.kind, tc.lost, tc.oversold, r.Verdict)
			}
			if r.Verdict == "" || strings.Contains(r.Verdict, "\n") {
				t.Fatalf("verdict must be one line: %q", r.Verdict)
			}
		})
	}
}

func TestSummariseCountsEveryOutcome(t *testing.T) {
	as := []Answer{
		{Outcome: Sold, Overlap: true}, {Outcome: Sold, ReleasedOther: true, LeaseLost: true},
		{Outcome: OutOfStock}, {Outcome: LockFailed}, {Outcome: Failed, Message: "first"}, {Outcome: Failed, Message: "second"},
	}
	r := summarise("v2", Scenario{Name: "t"}, as, lats(len(as)), -1, 98, time.Second)
	want := Result{Successes: 2, OutOfStock: 1, LockFailures: 1, Errors: 2, Overlaps: 1, ReleasedOther: 1, LeaseLost: 1}
	if r.Successes != want.Successes || r.OutOfStock != want.OutOfStock || r.LockFailures != want.LockFailures ||
		r.Errors != want.Errors || r.Overlaps != want.Overlaps || r.ReleasedOther != want.ReleasedOther || r.LeaseLost != want.LeaseLost {
		t.Fatalf("got %+v", r)
	}
	if r.SampleError != "first" || r.FirstSale != 0 {
		t.Fatalf("sample error %q, first sale %v", r.SampleError, r.FirstSale)
	}
	if r.P50 != Duration(3*time.Millisecond) || r.P99 != Duration(6*time.Millisecond) {
		t.Fatalf("p50 %v p99 %v", r.P50, r.P99)
	}
}

func TestQuantile(t *testing.T) {
	ds := lats(100)
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := quantile(ds, c.q); got != c.want {
			t.Errorf("q%.2f = %v, want %v", c.q, got, c.want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("empty input")
	}
}

func TestWriteTableHasARowAndAVerdictPerStrategy(t *testing.T) {
	sc, _ := Scenarios("contention", 0, 0)
	var rs []Result
	for i, s := range Strategies {
		rs = append(rs, summarise(s, sc, answers(100, Answer{Outcome: Sold}), lats(100), 0, int64(i), time.Second))
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range Strategies {
		if strings.Count(out, "\n"+s+" ") != 1 || !strings.Contains(out, " "+s+"  ") {
			t.Errorf("strategy %s: want one table row and one verdict line in\n%s", s, out)
		}
	}
	if !strings.Contains(out, "nolock       ✘ UNSAFE: no lock shared") || !strings.Contains(out, "✘ LOST UPDATES: 8 sale(s)") {
		t.Errorf("verdicts missing:\n%s", out)
	}
}

func TestResultJSONRoundTrip(t *testing.T) {
	r := Result{Strategy: "dlock", Successes: 100, P50: Duration(1500 * time.Microsecond), Kind: KindCorrect}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"p50_ms":1.5`) || !strings.Contains(string(b), `"successes":100`) {
		t.Fatalf("json %s", b)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || back.P50 != r.P50 || back.Successes != 100 {
		t.Fatalf("round trip %+v %v", back, err)
	}
}

func TestUnknownScenario(t *testing.T) {
	if _, err := Scenarios("nope", 0, 0); !errors.Is(err, ErrUnknownScenario) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err %v", err)
	}
	sc, err := Scenarios("slow-holder", 7, 0)
	if err != nil || sc.Requests != 7 || sc.Params.Work+sc.Params.Stall <= sc.Params.Lease {
		t.Fatalf("slow-holder must hold longer than its lease: %+v %v", sc, err)
	}
}

// A7: a strategy with no lock shared by the instances is never judged
// correct, however quiet the run (the crash scenario's spaced requests
// overlap nowhere); a locked strategy with the same numbers is.
func TestA7CrashNeverJudgesUnlockedStrategiesCorrect(t *testing.T) {
	crash, _ := Scenarios("crash", 0, 0)
	for _, s := range Strategies {
		r := summarise(s, crash, answers(20, Answer{Outcome: Sold}), lats(20), 300*time.Millisecond, 80, time.Second)
		unlocked := s == "nolock" || s == "local"
		if m, _ := Mark(r.Kind); unlocked && (r.Kind != KindUnsafe || m == "✔") {
			t.Errorf("%s under crash: %s %q, want unsafe", s, r.Kind, r.Verdict)
		}
		if !unlocked && r.Kind != KindCorrect {
			t.Errorf("%s under crash, 20 sold, stock 80: %s %q, want correct", s, r.Kind, r.Verdict)
		}
	}
}
