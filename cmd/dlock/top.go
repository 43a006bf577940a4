package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newTopCmd) }

// topOptions are the flags of `dlock top`.
type topOptions struct {
	interval time.Duration
	sortBy   string
	once     bool
	asJSON   bool
}

func newTopCmd() *cobra.Command {
	var (
		sf storeFlags
		o  topOptions
	)
	cmd := &cobra.Command{
		Use:   "top [PATTERN]",
		Short: "Watch the locks, read-write locks and semaphores held, refreshed in place",
		Long: `top shows what is held in the store and refreshes the view every --interval
(1s by default) until interrupted (Ctrl-C or SIGTERM, exit 0): each held lock
with its holder (as status shows it), remaining TTL, fence, waiters (when the
store can count them, driver.WaiterCounter; "?" otherwise) and metadata; each
holding of a read-write lock (mode, and "writer queued" when a writer waits)
and of a semaphore (permits used of N, and the holding's permits), where the
store can list them (driver.RWLister, driver.PermitLister; today Redis). The
heading says which of them this store cannot list. PATTERN is a glob over
keys, as for list.

On a terminal the view takes the whole screen (the alternate screen, as
less and top do) and each frame replaces the last in place (ANSI escape
codes); q (or Ctrl-C) ends it and gives the screen back as it was.
Otherwise the frames follow one another, each starting with its heading line
"dlock top". --sort orders the rows: key (the default), ttl (soonest expiry
first, unknown last), fence (highest first) or waiters (most first, unknown
last).

--once prints one frame and exits. --once --json prints the frame as one
object: at, locks (as list --json, with waiters), rwlocks and semaphores (as
list --kind rwlock/semaphore --json) and unsupported (the kinds this store
cannot list) (docs/cli.md, "JSON output").

Exit status: 0 (also when interrupted); 64 bad usage, or a store that cannot
list keys; 69 store unreachable, or it cannot list right now (the view stops
at the first failed refresh); 77 refused by the store.

` + storeFlagsHelp,
		Example: `  dlock top
  dlock top --sort ttl 'orders:*'
  dlock top --once
  dlock top --once --json | jq '.locks[] | {key, ttl_ms, waiters}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return exitWith(ExitUsage, errors.New("top: at most one PATTERN"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			pattern := "*"
			if len(args) == 1 && args[0] != "" {
				pattern = args[0]
			}
			if err := o.check(pattern); err != nil {
				return err
			}
			st, err := sf.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			out := cmd.OutOrStdout()
			draw := func(ctx context.Context, first bool) error {
				f, err := readFrame(ctx, st.Store, pattern, o.sortBy, time.Now())
				if err != nil {
					return err
				}
				if o.asJSON {
					return writeJSON(out, f)
				}
				return writeFrame(out, f, pattern, o.sortBy, isTerminal(out), first)
			}
			if o.once {
				return draw(cmd.Context(), true)
			}
			ctx := cmd.Context()
			if isTerminal(out) {
				var restore func()
				ctx, restore = enterView(ctx, cmd.InOrStdin(), out)
				defer restore()
			}
			return topLoop(ctx, o.interval, draw)
		},
	}
	cmd.Flags().DurationVar(&o.interval, "interval", time.Second, "time between refreshes (at least 10ms)")
	cmd.Flags().StringVar(&o.sortBy, "sort", sortKey, "order of the rows: key, ttl, fence or waiters")
	cmd.Flags().BoolVar(&o.once, "once", false, "print one frame and exit")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "with --once: print the frame as JSON")
	sf.register(cmd)
	return cmd
}

// check refuses bad flags and a bad PATTERN, before any I/O.
func (o topOptions) check(pattern string) error {
	if err := checkGlob(pattern); err != nil {
		return exitWith(ExitUsage, fmt.Errorf("top: bad PATTERN %q: %w", pattern, err))
	}
	if err := checkSort(o.sortBy); err != nil {
		return err
	}
	if o.interval < 10*time.Millisecond {
		return exitWith(ExitUsage, fmt.Errorf("top: --interval %v: want at least 10ms", o.interval))
	}
	if o.asJSON && !o.once {
		return exitWith(ExitUsage, errors.New("top: --json needs --once"))
	}
	return nil
}

// topLoop calls draw at once and then every interval until ctx is done,
// which ends it with nil; a failed draw ends it with draw's error (nil if
// ctx was done by then). first is true for the first call only.
func topLoop(ctx context.Context, interval time.Duration, draw func(ctx context.Context, first bool) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for first := true; ; first = false {
		if err := draw(ctx, first); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ANSI escape codes of the in-place view.
const (
	ansiHome      = "\x1b[H"  // cursor to the top left
	ansiClear     = "\x1b[2J" // clear the screen
	ansiClearLine = "\x1b[K"  // clear to the end of the line
	ansiClearDown = "\x1b[J"  // clear to the end of the screen
)

// writeFrame writes one text frame in one Write. On a terminal (ansi) it
// clears the screen before the first frame and overwrites the last one in
// place; otherwise frames after the first are preceded by a blank line.
func writeFrame(w io.Writer, f topFrame, pattern, sortBy string, ansi, first bool) error {
	var b bytes.Buffer
	printFrame(&b, f, pattern, sortBy)
	var out strings.Builder
	switch {
	case ansi && first:
		out.WriteString(ansiClear + ansiHome)
	case ansi:
		out.WriteString(ansiHome)
	case !first:
		out.WriteString("\n")
	}
	if !ansi {
		out.Write(b.Bytes())
	} else {
		for line := range strings.Lines(b.String()) {
			out.WriteString(strings.TrimSuffix(line, "\n") + ansiClearLine + "\n")
		}
		out.WriteString(ansiClearDown)
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// isTerminal reports whether w is a character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
