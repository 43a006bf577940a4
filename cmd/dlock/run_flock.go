package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// flockFlags are the habits of flock(1) and etcdctl lock that run accepts
// besides its own flags: -n (a single try), -E N (the exit status when the
// lock is held by another owner) and the key as the first argument.
type flockFlags struct {
	nonblock     bool // -n, --nonblock: the same as --wait 0
	conflictCode int  // -E, --conflict-exit-code; meaningful only if conflictSet
	conflictSet  bool
}

// conflictExit is run's exit status when the lock is held by another owner.
func (f *flockFlags) conflictExit() int {
	if f.conflictSet {
		return f.conflictCode
	}
	return ExitNotAcquired
}

func (f *runFlags) registerFlock(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVarP(&f.nonblock, "nonblock", "n", false, "fail at once if the lock is held (as flock -n; the same as --wait 0)")
	fl.IntVarP(&f.conflictCode, "conflict-exit-code", "E", ExitNotAcquired,
		"exit status when the lock is held by another owner (single try, or --wait elapsed), 0-255 (as flock -E)")
}

// applyFlock checks the flock-style flags and turns -n into --wait 0. -n
// with a --wait other than 0, or -E outside 0-255, is a usage error.
func (f *runFlags) applyFlock(cmd *cobra.Command) error {
	f.conflictSet = cmd.Flags().Changed("conflict-exit-code")
	if f.conflictCode < 0 || f.conflictCode > 255 {
		return exitWith(ExitUsage, fmt.Errorf("run: --conflict-exit-code %d is outside 0-255", f.conflictCode))
	}
	if !f.nonblock {
		return nil
	}
	if f.waitSet && f.wait != 0 {
		return exitWith(ExitUsage, fmt.Errorf("run: -n (a single try) contradicts --wait %v", f.wait))
	}
	f.wait, f.waitSet = 0, true
	return nil
}

// takeKey takes KEY from the arguments when --key is not given, as etcdctl
// lock takes its name: dlock run [flags] KEY [flags --] [--] COMMAND [ARG...].
// Flags after KEY are run's only up to a "--" (a command never starts with
// "-"). With --key the arguments are the command, as they always were; so
// are those after a leading "--" (dlock run -- COMMAND still lacks its key).
func (f *runFlags) takeKey(cmd *cobra.Command, args []string) ([]string, error) {
	if f.key != "" || len(args) == 0 || cmd.ArgsLenAtDash() == 0 {
		return args, nil
	}
	f.key, args = args[0], args[1:]
	if len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "--" {
		dash := slices.Index(args, "--")
		if dash < 0 {
			return nil, exitWith(ExitUsage, fmt.Errorf("run: %s after KEY: put run's flags before KEY, or end them with -- before COMMAND", args[0]))
		}
		if err := cmd.Flags().Parse(args[:dash]); err != nil {
			return nil, exitWith(ExitUsage, fmt.Errorf("run: %w", err))
		}
		if rest := cmd.Flags().Args(); len(rest) > 0 {
			return nil, exitWith(ExitUsage, fmt.Errorf("run: unexpected %q among the flags after KEY", rest[0]))
		}
		args = args[dash:]
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	return args, nil
}

// errMissingKey is run's usage error without a key.
var errMissingKey = errors.New("run: KEY is required (dlock run KEY -- COMMAND, or --key KEY)")

// waitValue is --wait (-w): a Go duration (10s, 1m30s), or a number of
// seconds (10, 0.5) as flock -w takes it. Its zero value prints as nothing,
// so that the help does not show a default of 0 (the default is to wait
// forever; 0 is a single try).
type waitValue struct{ d *time.Duration }

func (v waitValue) String() string {
	if v.d == nil || *v.d == 0 {
		return ""
	}
	return v.d.String()
}

func (v waitValue) Set(s string) error {
	if d, err := time.ParseDuration(s); err == nil {
		*v.d = d
		return nil
	}
	sec, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(sec) || math.Abs(sec) > math.MaxInt64/float64(time.Second) {
		return fmt.Errorf("want a duration (10s, 1m30s) or a number of seconds (10, 0.5)")
	}
	*v.d = time.Duration(sec * float64(time.Second))
	return nil
}

func (waitValue) Type() string { return "duration" }
