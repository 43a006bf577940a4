package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newVersionCmd) }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version of dlock and of the Go toolchain that built it",
		Example: `  dlock version`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "dlock %s\n", versionString())
			return nil
		},
	}
}

// versionString is the module version and the Go toolchain that built this
// binary, "(devel) (unknown)" when the binary carries no build information.
func versionString() string {
	v, goVersion := "(devel)", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		v, goVersion = bi.Main.Version, bi.GoVersion
	}
	return fmt.Sprintf("%s (%s)", v, goVersion)
}
