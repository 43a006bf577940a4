package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"example.com/dlock"
	"example.com/dlock/driver"
)

func init() { subcommands = append(subcommands, newListCmd) }

func newListCmd() *cobra.Command {
	var (
		sf     storeFlags
		asJSON bool
		kind   string
	)
	cmd := &cobra.Command{
		Use:   "list [PATTERN]",
		Short: "List held locks whose key matches a glob PATTERN (default: all)",
		Long: `list shows the locks currently held, with their holder (abbreviated token),
hold count, remaining TTL, fence and, in a META column when some holder has
it, the holder's metadata (as status shows it). PATTERN is a glob over lock keys
(* ? [abc] [^a], backslash escapes; * and ? also match '/'; a class without
its closing ']', or a lone backslash at the end, is a usage error). It works on every
store that can list keys (driver.Lister), which finds them without blocking
the store (SCAN on Redis, on every primary of a Cluster; on Redlock every
node, each lock shown as a majority of the nodes sees it, like status). Keys
whose value is not a lock are skipped. A lock that is released during the
listing may be missing from the output.

--kind rwlock lists the read-write locks in use instead (one line per
holding: mode, holder, TTL, fence, and whether a writer is queued), --kind
semaphore the semaphores with permits out (used of N, one line per holding),
on stores that can list them (driver.RWLister, driver.PermitLister; today
Redis). They are separate from the locks of the same names (dlock run
--help). --json prints an array of objects: key, held, holder, holder_kind,
holds, ttl_ms, fence for the locks; key and rwlock, or key and semaphore, as
status --json gives them, for the others (docs/cli.md, "JSON output").

Exit status: 0; 64 bad usage, or a store that cannot list keys; 69 store
unreachable, or it cannot list right now; 77 refused by the store (a
missing permission).

` + storeFlagsHelp,
		Example: `  dlock list
  dlock list 'orders:*'
  dlock list --json | jq -r '.[].key'
  dlock list --kind rwlock 'reports*'
  dlock list --kind semaphore --json | jq '.[] | {key, used: .semaphore.used}'
  dlock list --store redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return exitWith(ExitUsage, errors.New("list: at most one PATTERN"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			pattern := "*"
			if len(args) == 1 && args[0] != "" {
				pattern = args[0]
			}
			if err := checkGlob(pattern); err != nil {
				return exitWith(ExitUsage, fmt.Errorf("list: bad PATTERN %q: %w", pattern, err))
			}
			if err := checkKind(kind); err != nil {
				return err
			}
			st, err := sf.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			if kind != kindMutex {
				rows, err := listFamily(cmd.Context(), st.Store, kind, pattern)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), rows)
				}
				printFamilyList(cmd.OutOrStdout(), kind, rows)
				return nil
			}
			rows, err := listLocks(cmd.Context(), st.Store, pattern)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rows)
			}
			printList(cmd.OutOrStdout(), rows)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (an array)")
	cmd.Flags().StringVar(&kind, "kind", kindMutex, "what to list: mutex (the locks), rwlock (read-write locks) or semaphore")
	sf.register(cmd)
	return cmd
}

// listLocks asks the store's Lister for the keys under pattern's literal
// prefix and keeps the held ones that match pattern. A store without a
// Lister gives ExitUsage, one that cannot list right now
// (errors.ErrUnsupported) ExitUnavailable.
func listLocks(ctx context.Context, store driver.Mutex, pattern string) ([]lockStatus, error) {
	l, ok := driver.As[driver.Lister](store)
	if !ok {
		return nil, exitWith(ExitUsage, errors.New("this store cannot list locks (it has no driver.Lister); use dlock status KEY"))
	}
	rows := []lockStatus{}
	err := l.List(ctx, globPrefix(pattern), func(key string, info driver.Info) bool {
		if info.Held && globMatch(pattern, key) {
			rows = append(rows, lockStatusOf(key, info))
		}
		return ctx.Err() == nil
	})
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return nil, exitWith(ExitUnavailable, fmt.Errorf("list: the store cannot list locks now: %w", plain(err)))
	case errors.Is(err, dlock.ErrRefused):
		return nil, exitWith(ExitRefused, fmt.Errorf("list: %w", plain(err)))
	case err != nil:
		return nil, exitFor(fmt.Errorf("list: %w", err))
	case ctx.Err() != nil:
		return nil, exitFor(ctx.Err())
	}
	slices.SortFunc(rows, func(a, b lockStatus) int { return strings.Compare(a.Key, b.Key) })
	return rows, nil
}

func printList(w io.Writer, rows []lockStatus) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no locks held")
		return
	}
	// The META column is there only when some holder has metadata.
	withMeta := slices.ContainsFunc(rows, func(r lockStatus) bool { return r.Meta != "" })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "KEY\tHOLDER\tHOLDS\tTTL\tFENCE"
	if withMeta {
		header += "\tMETA"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		ttl := "unknown"
		if r.ttl() >= 0 {
			ttl = roundDur(msDur(r.ttl())).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d", r.Key, r.holderText(), r.Holds, ttl, r.Fence)
		if withMeta {
			fmt.Fprintf(tw, "\t%s", r.Meta)
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}
