package main

import (
	"fmt"
	"slices"
	"strings"

	"example.com/dlock/cmd/dlock/internal/inventory"
	"github.com/spf13/cobra"
)

// checkEmbeddedScenario checks the flags a scenario that runs only on the
// embedded server shares (pay-twice, rate-limit): none of payFlagsOff,
// 2-32 instances, and strategies among known.
func checkEmbeddedScenario(cmd *cobra.Command, f *demoFlags, scenario string, known []string) error {
	for _, name := range payFlagsOff {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s does not apply to --scenario %s (it runs on the embedded server, with no report)", name, scenario)
		}
	}
	if f.instances < 2 || f.instances > 32 {
		return fmt.Errorf("--instances %d: want 2-32", f.instances)
	}
	for _, s := range f.strategies {
		if !slices.Contains(known, s) {
			return fmt.Errorf("--strategies: unknown %q for %s (want some of %s)", s, scenario, strings.Join(known, ","))
		}
	}
	return nil
}

// startEmbeddedDemo starts the embedded server of such a scenario and says
// which it is (on stderr with --json, so that stdout stays JSON). The
// caller closes it.
func startEmbeddedDemo(cmd *cobra.Command, f *demoFlags) (srv *inventory.Embedded, server string, err error) {
	srv, err = inventory.StartEmbedded()
	if err != nil {
		return nil, "", exitWith(ExitUnavailable, err)
	}
	server = "embedded Redis-protocol server (miniredis) on " + srv.Addr()
	if f.json {
		fmt.Fprintln(cmd.ErrOrStderr(), "dlock demo: store:", server)
	} else {
		fmt.Fprintln(cmd.OutOrStdout(), "store:", server)
	}
	return srv, server, nil
}
