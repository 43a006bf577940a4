package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"example.com/dlock/cmd/dlock/internal/ratedemo"
)

// rateScenario is the --scenario of the rate limiter demo.
const rateScenario = "rate-limit"

// rateScenarioHelp is the scenario's entry in demo --help.
const rateScenarioHelp = `  rate-limit   the rate limiter (dlock.NewLimiter): Redisson's example,
               trySetRate(OVERALL, 5, 1, SECONDS) then tryAcquire on 10
               threads, only 5 get one; here on --instances instances of
               --requests threads each (default 10), all released at once:
                 local         x/time/rate in each instance: 5 per instance
                 dlock         dlock.Limiter, GCRA on the store's clock:
                               5 in all
                 dlock-skewed  the same, the instances' clocks 2s apart
                               either way: still 5 in all
                 client-clock  a fixed window (INCR) keyed by each
                               instance's own clock second, skewed the
                               same (negative control): 5 per instance
               Runs on the embedded server only; no --report
`

// rateOutput is the rate-limit --json document.
type rateOutput struct {
	Server    string            `json:"server"`
	Embedded  bool              `json:"embedded"`
	Scenario  string            `json:"scenario"`
	Instances int               `json:"instances"`
	Threads   int               `json:"threads_per_instance"`
	Rate      int               `json:"rate"`
	PeriodMS  int64             `json:"period_ms"`
	Burst     int               `json:"burst"`
	SkewMS    int64             `json:"skew_ms"`
	Results   []ratedemo.Result `json:"results"`
}

// validateRate checks the flags of a rate-limit run and returns its
// configuration (the server's address left to fill). The flags it does
// not take are pay-twice's.
func validateRate(cmd *cobra.Command, f *demoFlags) (ratedemo.Config, error) {
	cfg := ratedemo.Config{Instances: f.instances, Threads: f.requests, Skew: ratedemo.DefaultSkew}
	if cfg.Threads == 0 {
		cfg.Threads = ratedemo.DefaultThreads
	}
	if err := checkEmbeddedScenario(cmd, f, rateScenario, ratedemo.Strategies); err != nil {
		return cfg, err
	}
	if cfg.Threads < 1 || cfg.Threads > 1000 {
		return cfg, fmt.Errorf("--requests %d: want 1-1000 threads per instance for %s", f.requests, rateScenario)
	}
	return cfg, nil
}

// runRateDemo runs the rate-limit scenario on an embedded server: the
// instances are in this process, each with its own connection to it.
func runRateDemo(cmd *cobra.Command, f *demoFlags) error {
	if !cmd.Flags().Changed("strategies") {
		f.strategies = slices.Clone(ratedemo.Strategies)
	}
	cfg, err := validateRate(cmd, f)
	if err != nil {
		return exitWith(ExitUsage, err)
	}
	srv, server, err := startEmbeddedDemo(cmd, f)
	if err != nil {
		return err
	}
	defer srv.Close()
	cfg.RedisAddr = srv.Addr()
	results, err := ratedemo.Run(cmd.Context(), cfg, f.strategies)
	if err != nil {
		return exitWith(ExitUnavailable, err)
	}
	return printRate(cmd.OutOrStdout(), f, rateOutput{Server: server, Embedded: true, Scenario: rateScenario,
		Instances: cfg.Instances, Threads: cfg.Threads, Rate: ratedemo.Rate, PeriodMS: ratedemo.Period.Milliseconds(),
		Burst: ratedemo.Rate, SkewMS: cfg.Skew.Milliseconds(), Results: results})
}

func printRate(w io.Writer, f *demoFlags, out rateOutput) error {
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(w, "scenario: %s, %d instances × %d threads, each tryAcquire once; limit %d per %dms, burst %d; skew ±%dms\n\n",
		out.Scenario, out.Instances, out.Threads, out.Rate, out.PeriodMS, out.Burst, out.SkewMS)
	return ratedemo.WriteTable(w, out.Results)
}
