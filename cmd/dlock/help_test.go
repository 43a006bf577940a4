package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every runnable subcommand documents itself with examples (issue 3:
// "--help for every subcommand with examples"); command groups such as
// `dlock inventory` are checked through their children.
func TestEverySubcommandHasHelpWithExamples(t *testing.T) {
	var walk func(path []string, c *cobra.Command)
	walk = func(path []string, c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			p := append(append([]string(nil), path...), sub.Name())
			walk(p, sub)
			if !sub.Runnable() {
				continue
			}
			if strings.TrimSpace(sub.Example) == "" || sub.Short == "" {
				t.Errorf("dlock %s has no Short or Example", strings.Join(p, " "))
			}
			code, out, errOut := runCLI(t, append(p, "--help")...)
			if code != 0 || !strings.Contains(out, "Examples:") {
				t.Errorf("dlock %s --help: exit %d, stdout %q, stderr %q", strings.Join(p, " "), code, out, errOut)
			}
		}
	}
	walk(nil, newRootCmd(nil, nil))
}
