package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"example.com/dlock"
	"example.com/dlock/driver"
)

func init() { subcommands = append(subcommands, newReleaseCmd) }

// releaseResult is the output of `dlock release --force`; its JSON is
// documented in docs/cli.md ("JSON output").
type releaseResult struct {
	Key      string      `json:"key"`
	Released bool        `json:"released"`             // something was ended or removed
	NotALock bool        `json:"not_a_lock,omitempty"` // what was removed was a value that is not a lock
	Ended    *lockStatus `json:"ended,omitempty"`      // the holding ended, as status shows it
}

// releaseOptions are release's flags.
type releaseOptions struct {
	sf            storeFlags
	force, yes    bool
	asJSON        bool
	stdinTerminal func() bool // whether stdin is a terminal; a seam for tests
}

func newReleaseCmd() *cobra.Command {
	o := &releaseOptions{}
	cmd := &cobra.Command{
		Use:   "release --force KEY",
		Short: "Break a lock: free KEY whoever holds it (asks first, unless --yes)",
		Long: `release --force frees the lock KEY whoever holds it: for a holder that hung
without dying, or a value that is not a lock blocking the key. It says whose
holding it ended (the holder as status shows it, hold count, remaining lease,
fence). The holder is not stopped: its next renewal finds the lock gone and
reports it lost as taken by another owner (dlock run stops its command and
exits 76); until then it may still act as the holder, so break only a holder
you know to be stuck. Fences keep rising: the next holder's is greater than
the broken one's, so a resource that checks fences refuses the broken
holder's late writes.

On a terminal it shows the holder and asks before breaking; --yes skips the
question. Without a terminal, --yes is required. A free key is reported as
not held and nothing changes (exit 0). Without --force, release refuses: the
CLI never holds another process's token, so a release is always a break.

Stores (docs/stores.md): Redis (one server, Cluster, Sentinel), etcd and the
PostgreSQL and MariaDB lease tables (mode=lease) break locks; Redis also
removes a value that is not a lock at the key, etcd one under the lock's
prefix. An etcdctl lock holder is not told it lost the lock. Redlock,
the fair Redis store (fair=true), ZooKeeper and the SQL session locks
(mode=session) cannot (exit 64).

--json prints one object: key, released, not_a_lock, and ended (the holding
ended, as status --json shows a key).

Exit status: 0 released, or the key was not held; 64 bad usage, no --force,
no terminal and no --yes, the question declined, or a store that cannot
break locks; 69 store unreachable; 77 refused by the store (a permission is
missing; on etcd, a key held through a lock whose name extends KEY).

` + storeFlagsHelp,
		Example: `  dlock release --force nightly-report
  dlock release --force --yes --store redis://10.0.0.5:6379 deploy
  dlock release --force --yes --json --store etcd://10.0.0.7:2379/locks deploy | jq .ended.fence`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return exitWith(ExitUsage, errors.New("release: need exactly one KEY"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runRelease(cmd, o, args[0]) },
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "break the lock whoever holds it (required)")
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "do not ask for confirmation (required without a terminal)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	o.sf.register(cmd)
	o.stdinTerminal = func() bool {
		f, ok := cmd.InOrStdin().(interface{ Fd() uintptr })
		return ok && term.IsTerminal(int(f.Fd()))
	}
	return cmd
}

// runRelease checks the flags before any I/O, then asks (on a terminal,
// without --yes), breaks the lock and prints what it ended.
func runRelease(cmd *cobra.Command, o *releaseOptions, key string) error {
	if err := dlock.ValidateKey(key); err != nil {
		return exitWith(ExitUsage, plain(err))
	}
	if !o.force {
		return exitWith(ExitUsage, errors.New("release needs --force: the CLI holds no other process's token, so it can only break the lock, whoever holds it"))
	}
	ask := !o.yes
	if ask && !o.stdinTerminal() {
		return exitWith(ExitUsage, errors.New("release --force: stdin is not a terminal to confirm on; add --yes"))
	}
	ctx := cmd.Context()
	st, err := o.sf.connect(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, ok := driver.As[driver.Breaker](st.Store); !ok {
		return exitWith(ExitUsage, fmt.Errorf("%s cannot break locks (it has no driver.Breaker; docs/stores.md says what to do instead)", st.Desc))
	}
	if ask {
		if free, err := confirmBreak(ctx, cmd, st.Store, key); err != nil {
			return err
		} else if free {
			return printRelease(cmd.OutOrStdout(), o.asJSON, releaseResult{Key: key})
		}
	}
	b, err := dlock.Break(ctx, st.Store, key)
	if err != nil {
		if errors.Is(err, dlock.ErrRefused) {
			return exitWith(ExitRefused, fmt.Errorf("key %q: %w", key, refusal(err, key)))
		}
		return exitFor(err)
	}
	res := releaseResult{Key: key, Released: b.Held, NotALock: b.NotALock}
	if b.Held && !b.NotALock {
		s := lockStatusOf(key, b.Info)
		res.Ended = &s
	}
	return printRelease(cmd.OutOrStdout(), o.asJSON, res)
}

// confirmBreak shows the key's state on stderr and asks on it whether to
// break; it reports free when the key is not held (nothing to ask), and
// an ExitUsage error when the answer is not yes.
func confirmBreak(ctx context.Context, cmd *cobra.Command, store driver.Mutex, key string) (free bool, err error) {
	w := cmd.ErrOrStderr()
	what := fmt.Sprintf("Break the lock %q (the store cannot show its holder)?", key)
	if in, ok := driver.As[driver.Inspector](store); ok {
		info, err := in.Inspect(ctx, key)
		switch {
		case errors.Is(err, dlock.ErrRefused):
			what = fmt.Sprintf("The key %q holds a value that is not a lock. Remove it?", key)
		case err != nil:
			return false, exitFor(err)
		case !info.Held:
			return true, nil
		default:
			s := lockStatusOf(key, info)
			what = fmt.Sprintf("The lock %q is held by %s (holds %d, fence %d, lease %s).\nBreak it? Its holder runs on until its next renewal finds the lock gone.", key, s.holderText(), s.Holds, s.Fence, leaseLeft(s))
		}
	}
	fmt.Fprintf(w, "%s [y/N] ", what)
	line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return false, exitWith(ExitUsage, errors.New("release --force: not confirmed; nothing changed"))
	}
	return false, nil
}

// leaseLeft is a held key's remaining lease as release says it.
func leaseLeft(s lockStatus) string {
	if s.ttl() < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%v left", roundDur(msDur(s.ttl())))
}

// printRelease prints res as JSON or as lines in the manner of status.
func printRelease(w io.Writer, asJSON bool, res releaseResult) error {
	if asJSON {
		return writeJSON(w, res)
	}
	fmt.Fprintf(w, "key:      %s\n", res.Key)
	switch {
	case !res.Released:
		fmt.Fprintf(w, "released: no (not held; nothing changed)\n")
	case res.NotALock:
		fmt.Fprintf(w, "released: yes (removed a value that was not a lock)\n")
	default:
		s := res.Ended
		fmt.Fprintf(w, "released: yes (by force; the holder learns at its next renewal)\n")
		fmt.Fprintf(w, "holder:   %s\n", s.holderText())
		fmt.Fprintf(w, "holds:    %d\n", s.Holds)
		fmt.Fprintf(w, "lease:    %s\n", leaseLeft(*s))
		fmt.Fprintf(w, "fence:    %d (the next holder's is greater)\n", s.Fence)
	}
	return nil
}
