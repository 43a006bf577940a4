package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newListCmd) }

func newListCmd() *cobra.Command {
	var (
		sf     storeFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list [PATTERN]",
		Short: "List held locks whose key matches a glob PATTERN (default: all)",
		Long: `list shows the locks currently held, with their holder (abbreviated token),
hold count, remaining TTL and fence. PATTERN is a Redis glob over lock keys
(* ? [abc], backslash escapes). Keys are found with SCAN, never KEYS, so a
large database is not blocked; on a Cluster every primary is scanned. With
--redlock every node is scanned (a minority may be down) and each lock is
shown as a majority of the nodes sees it, like status. A lock that is
released during the scan may be missing from the output.

Exit status: 0; 64 bad usage; 69 store unreachable; 77 refused by the store
(a key that holds a value that is not a lock, or a missing permission).

` + storeFlagsHelp,
		Example: `  dlock list
  dlock list 'orders:*'
  dlock list --json | jq -r '.[].key'
  dlock list --redis-cluster 'redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002'`,
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
			st, err := sf.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			rows, err := listLocks(cmd.Context(), st, sf.prefix, pattern)
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
	sf.register(cmd)
	return cmd
}

// listLocks scans every server of the store for locks matching pattern
// and inspects each; keys released meanwhile are left out.
func listLocks(ctx context.Context, st *openedStore, prefix, pattern string) ([]lockStatus, error) {
	match := escapeGlob(prefix) + "{" + pattern + "}"
	seen := map[string]bool{}
	var mu sync.Mutex
	add := func(name string) {
		mu.Lock()
		seen[name] = true
		mu.Unlock()
	}
	var errs []error // a Redlock store lists while a majority of its nodes answer
	for _, c := range st.Clients {
		var err error
		if cc, ok := c.(*redis.ClusterClient); ok {
			err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
				return scanLocks(ctx, n, prefix, match, add)
			})
		} else {
			err = scanLocks(ctx, c, prefix, match, add)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if majorityFailed(len(errs), len(st.Clients)) {
		return nil, exitWith(ExitUnavailable, fmt.Errorf("list: scan: %w", errors.Join(errs...)))
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	rows := []lockStatus{}
	for _, n := range names {
		s, err := inspect(ctx, st.Store, n)
		if err != nil {
			return nil, err
		}
		if s.Held {
			s.Waiters = nil // counted only by status: one more round trip per key
			rows = append(rows, s)
		}
	}
	return rows, nil
}

// scanLocks calls add with the name of every lock on one server (a string;
// release records PREFIX{K}:released:<token>, and the fence counters of
// earlier versions, do not end in "}" and so do not match).
func scanLocks(ctx context.Context, c redis.Cmdable, prefix, match string, add func(string)) error {
	it := c.ScanType(ctx, 0, match, 500, "string").Iterator()
	for it.Next(ctx) {
		k := it.Val()
		if len(k) < len(prefix)+2 || !strings.HasPrefix(k, prefix+"{") || !strings.HasSuffix(k, "}") {
			continue
		}
		add(k[len(prefix)+1 : len(k)-1])
	}
	return it.Err()
}

// escapeGlob quotes the glob metacharacters of a literal prefix.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func printList(w io.Writer, rows []lockStatus) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no locks held")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tHOLDER\tHOLDS\tTTL\tFENCE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%d\n", r.Key, r.Holder, r.Holds, roundDur(msDur(r.TTLms)), r.Fence)
	}
	_ = tw.Flush()
}
