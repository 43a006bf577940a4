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
			v, goVersion := "(devel)", "unknown"
			if bi, ok := debug.ReadBuildInfo(); ok {
				v, goVersion = bi.Main.Version, bi.GoVersion
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dlock %s (%s)\n", v, goVersion)
			return nil
		},
	}
}
