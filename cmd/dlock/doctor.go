package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newDoctorCmd) }

// nodeReport is the checklist of one server.
type nodeReport struct {
	Node   string  `json:"node"`
	Checks []check `json:"checks"`
}

// doctorReport is the output of `dlock doctor`.
type doctorReport struct {
	Target string       `json:"target"`
	Safe   bool         `json:"safe"` // no check failed
	Nodes  []nodeReport `json:"nodes"`
}

// doctorLong is the help text of the subcommand, before the store flags'.
const doctorLong = `doctor checks the servers behind the selected store and prints a checklist
(OK / WARN / FAIL, each problem with its fix):

  version           Redis 7.0 or later (FAIL otherwise: locking needs SET NX GET)
  maxmemory-policy  must be noeviction: any volatile-* or allkeys-* policy can
                    evict a held lock's key, and another client then takes it (FAIL)
  persistence       appendonly yes + appendfsync always keeps held locks across
                    restarts (WARN otherwise; fences come from the server's clock)
  replication       a primary with asynchronous replicas can lose a lock in a
                    failover (WARN); connected to a replica (FAIL)
  latency           median of 5 PINGs (WARN above 20ms)
  acl               the commands dlock needs (EVALSHA, EVAL, SCRIPT LOAD, SUBSCRIBE,
                    PUBLISH, TIME and the string commands of its scripts, PUBSUB
                    and SCAN for status/list), by ACL DRYRUN when allowed, else by trying
                    them on a throw-away key; forbidden ones are reported (WARN)

A check that cannot run (CONFIG or INFO forbidden, say) is reported as WARN
"cannot check", never as a crash. On a Cluster every primary is checked. A
server that does not answer (a Redlock node that is down) gets one FAIL line,
connection, and no other check.

Exit status: 0 when nothing failed (warnings allowed); 78 when a check
failed; 64 bad usage; 69 store unreachable (for Redlock: no majority answers);
77 the server refused the user (WRONGPASS, NOAUTH).

`

func newDoctorCmd() *cobra.Command {
	var (
		sf     storeFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check a Redis deployment for lock safety and say what to fix",
		Long:  doctorLong + storeFlagsHelp,
		Example: `  dlock doctor --redis redis://127.0.0.1:6379
  dlock doctor --redis rediss://locker:secret@redis.internal:6380
  dlock doctor --redis-sentinel 'redis://10.0.0.1:26379?master_name=mymaster&addr=10.0.0.2:26379'
  dlock doctor --json | jq '.nodes[].checks[] | select(.status != "OK")'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 {
				return exitWith(ExitUsage, fmt.Errorf("doctor: unexpected argument %q", args[0]))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := sf.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			rep := diagnose(cmd.Context(), st, sf.prefix)
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else {
				printDoctor(cmd.OutOrStdout(), rep)
			}
			if !rep.Safe {
				return exitWith(ExitUnsafe, nil)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	sf.register(cmd)
	return cmd
}

// diagnose runs the per-server checks on every server of the store (every
// primary of a Cluster) and the ACL check once per client. A server that
// does not answer (a Redlock minority may be down) gets one FAIL line and no
// other check: what it would allow or refuse is unknown.
func diagnose(ctx context.Context, st *openedStore, prefix string) doctorReport {
	rep := doctorReport{Target: st.Desc, Safe: true}
	var mu sync.Mutex
	for _, c := range st.Clients {
		if cc, ok := c.(*redis.ClusterClient); ok {
			acl := aclCheck(ctx, c, prefix)
			err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
				r := nodeReport{Node: n.Options().Addr, Checks: nodeOrUnreachable(ctx, n, func() []check { return append(nodeChecks(ctx, n), acl) })}
				mu.Lock()
				rep.Nodes = append(rep.Nodes, r)
				mu.Unlock()
				return nil
			})
			if err != nil {
				rep.Nodes = append(rep.Nodes, nodeReport{Node: st.Desc, Checks: []check{{Name: "cluster", Status: statusFail,
					Detail: "cannot reach every primary: " + oneLine(err), Fix: "check the cluster's health (CLUSTER INFO)"}}})
			}
			continue
		}
		rep.Nodes = append(rep.Nodes, nodeReport{Node: nodeName(c, st.Desc),
			Checks: nodeOrUnreachable(ctx, c, func() []check { return append(nodeChecks(ctx, c), aclCheck(ctx, c, prefix)) })})
	}
	slices.SortFunc(rep.Nodes, func(a, b nodeReport) int { return strings.Compare(a.Node, b.Node) })
	for _, n := range rep.Nodes {
		for _, c := range n.Checks {
			if c.Status == statusFail {
				rep.Safe = false
			}
		}
	}
	return rep
}

// nodeOrUnreachable runs checks if c answers a PING, and otherwise returns
// the single FAIL line that says it does not: checks run against a server
// that refuses connections would report "cannot check" causes (INFO, ACL)
// that are not the problem, or pass without having asked anything.
func nodeOrUnreachable(ctx context.Context, c redis.Cmdable, checks func() []check) []check {
	if err := c.Ping(ctx).Err(); err != nil {
		return []check{{Name: "connection", Status: statusFail, Detail: "does not answer: " + oneLine(err),
			Fix: "start the server or fix its address; nothing else could be checked"}}
	}
	return checks()
}

// nodeName labels a non-cluster client: its address, or the store's
// description for a Sentinel client (whose primary may move).
func nodeName(c redis.UniversalClient, desc string) string {
	if rc, ok := c.(*redis.Client); ok && !strings.Contains(desc, "sentinel") {
		return rc.Options().Addr
	}
	return desc
}

func printDoctor(w io.Writer, rep doctorReport) {
	fmt.Fprintf(w, "dlock doctor: %s\n", rep.Target)
	for _, n := range rep.Nodes {
		fmt.Fprintf(w, "\n%s\n", n.Node)
		for _, c := range n.Checks {
			fmt.Fprintf(w, "  %-4s  %-16s  %s\n", c.Status, c.Name, c.Detail)
			if c.Fix != "" && c.Status != statusOK {
				fmt.Fprintf(w, "        %-16s  fix: %s\n", "", c.Fix)
			}
		}
	}
	if rep.Safe {
		fmt.Fprintln(w, "\nno unsafe setting found")
	} else {
		fmt.Fprintln(w, "\nUNSAFE: fix the FAIL lines above before relying on these locks")
	}
}
