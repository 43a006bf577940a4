package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Scenario is a load pattern that makes a strategy's hole visible.
type Scenario struct {
	Name     string
	Requests int           // requests per strategy
	Interval time.Duration // 0: all at once; otherwise one request every Interval
	Params   Params        // sent with every request
	// Crash sends one extra request with crash=1 to the first instance
	// before the others, which go to the surviving instances.
	Crash bool
}

// Scenarios returns the named scenario with requests requests (0: the
// scenario's default) and work as the contention scenario's work delay.
// It fails with ErrUnknownScenario for other names.
func Scenarios(name string, requests int, work time.Duration) (Scenario, error) {
	var sc Scenario
	switch name {
	case "", "contention":
		// The articles' run: 100 requests ramped up over 100 ms (as a load
		// tool's ramp-up does), 30 s leases.
		sc = Scenario{Name: "contention", Requests: 100, Interval: time.Millisecond, Params: Params{Work: work}}
	case "slow-holder":
		// Each holder keeps the lock 1.25 leases: it writes well within the
		// lease, then stalls before its release (v3: between its check and
		// its delete), so the lease ends while it still holds the lock.
		// The lease leaves 400 ms of slack to the watchdog (renewing every
		// 200 ms) and 500 ms to the write, for loaded machines.
		sc = Scenario{Name: "slow-holder", Requests: 12, Interval: 75 * time.Millisecond,
			Params: Params{Lease: 600 * time.Millisecond, Work: 100 * time.Millisecond, Stall: 650 * time.Millisecond}}
	case "crash":
		// An instance dies holding the lock; the survivors keep selling.
		sc = Scenario{Name: "crash", Requests: 20, Interval: 50 * time.Millisecond, Crash: true,
			Params: Params{Lease: 300 * time.Millisecond, Work: work}}
	default:
		return sc, fmt.Errorf("%w: %q (want contention, slow-holder, crash or pay-twice)", ErrUnknownScenario, name)
	}
	if requests > 0 {
		sc.Requests = requests
	}
	return sc, nil
}

// ErrUnknownScenario is returned for a scenario name Scenarios does not know.
var ErrUnknownScenario = errors.New("inventory: unknown scenario")

// Load drives the instances.
type Load struct {
	Targets  []string     // base URLs of the instances, e.g. http://127.0.0.1:5000
	Client   *http.Client // nil: a client sized for the burst
	Progress io.Writer    // where progress bars go; nil: none
	// Restart brings instance i back after a crash scenario killed it.
	Restart func(ctx context.Context, i int) error
}

// Run runs sc against every strategy in turn and returns one Result each.
// It fails only when the instances cannot be reset or read; failed requests
// are results, not errors.
func (l *Load) Run(ctx context.Context, sc Scenario, strategies []string) ([]Result, error) {
	if len(l.Targets) == 0 || (sc.Crash && len(l.Targets) < 2) {
		return nil, fmt.Errorf("inventory: scenario %s needs at least %d instances", sc.Name, 1+btoi(sc.Crash))
	}
	if l.Client == nil {
		l.Client = &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	}
	var out []Result
	for _, s := range strategies {
		r, err := l.runOne(ctx, sc, s)
		if err != nil {
			return out, fmt.Errorf("inventory: strategy %s: %w", s, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (l *Load) runOne(ctx context.Context, sc Scenario, strategy string) (Result, error) {
	if err := l.reset(ctx); err != nil {
		return Result{}, err
	}
	targets := l.Targets
	start := time.Now()
	if sc.Crash {
		p := sc.Params
		p.Crash = true
		var a Answer
		if err := l.post(ctx, buyURL(targets[0], strategy, p), &a); err == nil {
			return Result{}, fmt.Errorf("the crash request got an answer (%s): is the instance running with crash enabled?", a.Outcome)
		}
		targets = targets[1:]
		start = time.Now()
	}
	bar := l.bar(sc, strategy)
	answers, lat, first := l.fire(ctx, sc, strategy, targets, bar)
	wall := time.Since(start)
	if bar != nil {
		_ = bar.Finish()
	}
	var st struct{ Stock int64 }
	if err := l.get(ctx, l.Targets[len(l.Targets)-1]+"/stock", &st); err != nil {
		return Result{}, err
	}
	if sc.Crash && l.Restart != nil {
		if err := l.Restart(ctx, 0); err != nil {
			return Result{}, err
		}
	}
	return summarise(strategy, sc, answers, lat, first, st.Stock, wall), nil
}

func (l *Load) bar(sc Scenario, strategy string) *progressbar.ProgressBar {
	if l.Progress == nil {
		return nil
	}
	return progressbar.NewOptions(sc.Requests,
		progressbar.OptionSetWriter(l.Progress),
		progressbar.OptionSetDescription(fmt.Sprintf("%-12s", strategy)),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(50*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(l.Progress) }),
	)
}

// fire sends sc.Requests requests spread round-robin over targets and
// returns the answers with their latencies (since each request was sent),
// and when the first sale was answered (since the first request; -1: none).
func (l *Load) fire(ctx context.Context, sc Scenario, strategy string, targets []string, bar *progressbar.ProgressBar) ([]Answer, []time.Duration, time.Duration) {
	answers := make([]Answer, sc.Requests)
	lat := make([]time.Duration, sc.Requests)
	ended := make([]time.Duration, sc.Requests)
	start := time.Now()
	var wg sync.WaitGroup
	var tick *time.Ticker
	if sc.Interval > 0 {
		tick = time.NewTicker(sc.Interval)
		defer tick.Stop()
	}
	for i := range sc.Requests {
		if tick != nil && i > 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			var a Answer
			if err := l.post(ctx, buyURL(targets[i%len(targets)], strategy, sc.Params), &a); err != nil && a.Outcome == "" {
				a = failed(err)
			}
			answers[i], lat[i], ended[i] = a, time.Since(t0), time.Since(start)
			if bar != nil {
				_ = bar.Add(1)
			}
		}()
	}
	wg.Wait()
	first := time.Duration(-1)
	for i, a := range answers {
		if a.Outcome == Sold && (first < 0 || ended[i] < first) {
			first = ended[i]
		}
	}
	return answers, lat, first
}

func buyURL(base, strategy string, p Params) string {
	q := url.Values{}
	if p.Work > 0 {
		q.Set("work", p.Work.String())
	}
	if p.Lease > 0 {
		q.Set("lease", p.Lease.String())
	}
	if p.Stall > 0 {
		q.Set("stall", p.Stall.String())
	}
	if p.Crash {
		q.Set("crash", "1")
	}
	u := base + "/buy/" + url.PathEscape(strategy)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// reset restores the stock. It is idempotent, which lets the HTTP client
// retry it on a connection the crash scenario's restart left dead.
func (l *Load) reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.Targets[0]+"/reset?stock="+fmt.Sprint(InitialStock), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", "reset")
	return l.do(req, nil)
}

// post sends a POST and decodes a JSON body into v (if not nil) whatever
// the status: /buy reports outcomes with 4xx codes.
func (l *Load) post(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	return l.do(req, v)
}

func (l *Load) get(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	return l.do(req, v)
}

func (l *Load) do(req *http.Request, v any) error {
	resp, err := l.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.Header.Get("Content-Type") != "application/json" {
		return fmt.Errorf("%s: %s: %s", req.URL.Path, resp.Status, body)
	}
	if v != nil {
		return json.Unmarshal(body, v)
	}
	return nil
}

// quantile returns the q-quantile (nearest rank) of ds; 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
