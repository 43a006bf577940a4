package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"example.com/dlock/cmd/dlock/internal/payment"
)

// payScenario is the --scenario of the idempotency demo.
const payScenario = "pay-twice"

// payScenarioHelp is the scenario's entry in demo --help.
const payScenarioHelp = `  pay-twice    the idempotency guard (dlock.Guard, idemhttp): a payment
               service on two instances, a fake provider that counts
               charges, --requests orders (default 20) per strategy:
                 noguard          a double click on two instances: two charges
                 noguard-retry    the instance dies after charging, the
                                  client retries on the other: two charges
                 guard            idemhttp: one runs, the other gets 409
                                  then the replay: one charge
                 guard-crash      the executor dies after charging; the
                                  retry takes over after the lease (300ms)
                                  and charges with the same DownstreamKey,
                                  which the provider dedups: one charge
                 guard-fence-key  the same, the charge keyed by the fence
                                  (negative control): two charges
               Runs on the embedded server only, the instances in this
               process; no --report (see docs/demo.md)
`

// payOutput is the pay-twice --json document.
type payOutput struct {
	Server    string           `json:"server"`
	Embedded  bool             `json:"embedded"`
	Scenario  string           `json:"scenario"`
	Instances int              `json:"instances"`
	LeaseMS   int64            `json:"lease_ms"`
	Results   []payment.Result `json:"results"`
}

// payFlagsOff are the demo's flags that pay-twice does not take: it runs
// on the embedded server and has no HTML report.
var payFlagsOff = []string{"store", "redis", "redis-cluster", "redis-sentinel", "redlock", "prefix", "report", "work"}

// validatePay checks the flags of a pay-twice run and returns its
// configuration (the server's address left to fill).
func validatePay(cmd *cobra.Command, f *demoFlags) (payment.Config, error) {
	cfg := payment.Config{Orders: f.requests, Instances: f.instances, Lease: payment.DefaultLease, Latency: payment.DefaultLatency}
	if cfg.Orders == 0 {
		cfg.Orders = payment.DefaultOrders
	}
	if err := checkEmbeddedScenario(cmd, f, payScenario, payment.Strategies); err != nil {
		return cfg, err
	}
	if cfg.Orders < 1 || cfg.Orders > 1000 {
		return cfg, fmt.Errorf("--requests %d: want 1-1000 orders for %s", f.requests, payScenario)
	}
	return cfg, nil
}

// runPayDemo runs the pay-twice scenario on an embedded server: the
// instances are HTTP servers in this process, each with its own
// connection to the server.
func runPayDemo(cmd *cobra.Command, f *demoFlags) error {
	if !cmd.Flags().Changed("strategies") {
		f.strategies = slices.Clone(payment.Strategies)
	}
	cfg, err := validatePay(cmd, f)
	if err != nil {
		return exitWith(ExitUsage, err)
	}
	srv, server, err := startEmbeddedDemo(cmd, f)
	if err != nil {
		return err
	}
	defer srv.Close()
	cfg.RedisAddr = srv.Addr()
	results, err := payment.Run(cmd.Context(), cfg, f.strategies)
	if err != nil {
		return exitWith(ExitUnavailable, err)
	}
	return printPay(cmd.OutOrStdout(), f, payOutput{Server: server, Embedded: true, Scenario: payScenario,
		Instances: cfg.Instances, LeaseMS: cfg.Lease.Milliseconds(), Results: results})
}

func printPay(w io.Writer, f *demoFlags, out payOutput) error {
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(w, "scenario: %s, %d instances, %d orders per strategy, lease %dms on the instance that dies\n\n",
		out.Scenario, out.Instances, out.Results[0].Orders, out.LeaseMS)
	return payment.WriteTable(w, out.Results)
}
