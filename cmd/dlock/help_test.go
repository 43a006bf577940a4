package main

import (
	"strings"
	"testing"
)

// Every subcommand documents itself with examples (issue 3: "--help for
// every subcommand with examples").
func TestEverySubcommandHasHelpWithExamples(t *testing.T) {
	root := newRootCmd(nil, nil)
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if strings.TrimSpace(c.Example) == "" || c.Short == "" {
			t.Errorf("dlock %s has no Short or Example", c.Name())
		}
		code, out, errOut := runCLI(t, c.Name(), "--help")
		if code != 0 || !strings.Contains(out, "Examples:") {
			t.Errorf("dlock %s --help: exit %d, stdout %q, stderr %q", c.Name(), code, out, errOut)
		}
	}
}
