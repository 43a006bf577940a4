package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newVersionCmd) }

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print the version of dlock and of the Go toolchain that built it",
		Example: "  dlock version\n  dlock version --json | jq -r .version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				v, goVersion := versions()
				return writeJSON(cmd.OutOrStdout(), struct {
					Version string `json:"version"`
					Go      string `json:"go"`
				}{v, goVersion})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dlock %s\n", versionString())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// versionString is the module version and the Go toolchain that built this
// binary, "(devel) (unknown)" when the binary carries no build information.
func versionString() string {
	v, goVersion := versions()
	return fmt.Sprintf("%s (%s)", v, goVersion)
}

// versions are the module version and the Go toolchain's, "(devel)" and
// "unknown" without build information.
func versions() (module, goVersion string) {
	module, goVersion = "(devel)", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		module, goVersion = bi.Main.Version, bi.GoVersion
	}
	return module, goVersion
}
