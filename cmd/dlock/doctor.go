package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"example.com/dlock/driver"
)

func init() { subcommands = append(subcommands, newDoctorCmd) }

// Check statuses, from harmless to unsafe.
const (
	statusOK   = "OK"
	statusWarn = "WARN"
	statusFail = "FAIL"
)

// check is one line of the doctor's checklist.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// doctorReport is the output of `dlock doctor`.
type doctorReport struct {
	Target string      `json:"target"`
	Safe   bool        `json:"safe"`           // no check failed
	Model  modelReport `json:"model,omitzero"` // absent when the store could not be reached
	Checks []check     `json:"checks"`
}

// modelReport is the store's declared time and liveness model.
type modelReport struct {
	MinTTL       string `json:"min_ttl"`
	MaxTTL       string `json:"max_ttl"` // "none" when unbounded
	Granularity  string `json:"granularity"`
	ServerClock  bool   `json:"server_clock"`
	Session      bool   `json:"session"`
	SessionTTL   string `json:"session_ttl,omitempty"`
	ProbeLeaseMs int64  `json:"probe_lease_ms"`
}

// doctorLong is the help text of the subcommand, before the store flags'.
const doctorLong = `doctor checks the selected store for lock safety and prints a checklist
(OK / WARN / FAIL, each problem with its fix). On every store it prints the
store's time model (TTL bounds, granularity, whose clock decides expiry,
per-key leases or a session) and runs a probe: acquire, extend and release a
probe key with a fresh token, each with its round-trip time, and (when the
store can inspect) checks that the key is free again. Then it runs the
store's own checks, if it has them (driver.Doctor). On Redis these are:

  version           Redis 7.0 or later (FAIL otherwise: locking needs SET NX GET)
  maxmemory-policy  must be noeviction: any volatile-* or allkeys-* policy can
                    evict a held lock's key, and another client then takes it (FAIL)
  persistence       appendonly yes + appendfsync always keeps held locks across
                    restarts (WARN otherwise; fences come from the server's clock)
  replication       a primary with asynchronous replicas can lose a lock in a
                    failover (WARN); connected to a replica (FAIL)
  latency           median of 5 PINGs (WARN above 20ms)
  acl               the commands dlock needs, by ACL DRYRUN when allowed, else by
                    trying them on a throw-away key; forbidden ones are reported (WARN)

On a Cluster every primary is checked, on Redlock every node (each check's
name is then ADDR/CHECK); a server that does not answer
gets one FAIL "connection" line and no other check. A store without checks
of its own gets a WARN line saying that only the probe ran. On an SQL store
whose lock tables are missing the first line is a FAIL "schema" with its fix
(dlock schema --store URL --apply) and the probe is skipped.

--json prints the report as one object (target, safe, model, checks), also
when the store cannot be reached or refuses the user: then one FAIL check
"connection" with the error and its fix, and no model.

Exit status: 0 when nothing failed (warnings allowed); 78 when a check
failed (a probe step included); 64 bad usage; 69 store unreachable (for
Redlock: no majority answers); 77 the store refused the user (WRONGPASS,
NOAUTH).

`

func newDoctorCmd() *cobra.Command {
	var (
		sf     storeFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check a store for lock safety and say what to fix",
		Long:  doctorLong + storeFlagsHelp,
		Example: `  dlock doctor --store redis://127.0.0.1:6379
  dlock doctor --store rediss://locker:secret@redis.internal:6380
  dlock doctor --store redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster
  dlock doctor --json | jq '.checks[] | select(.status != "OK")'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 {
				return exitWith(ExitUsage, fmt.Errorf("doctor: unexpected argument %q", args[0]))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := sf.connect(cmd.Context())
			noSchema := err
			if missingSchema(err) { // a FAIL check of its own, below, not a refusal
				st, err = sf.openWithin(cmd.Context(), connectTimeout)
			} else {
				noSchema = nil
			}
			if err != nil {
				if asJSON {
					writeUnreachableDoctor(cmd.OutOrStdout(), &sf, err)
				}
				return err
			}
			defer st.Close()
			rep := diagnose(cmd.Context(), st, noSchema)
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

// probeLease is the lease of the doctor's probe lock, before the store's
// bounds and granularity apply.
const probeLease = 10 * time.Second

// diagnose runs the generic probe and the store's own checks. With
// noSchema (the connection check found an SQL store's tables missing) the
// first check is a FAIL "schema" naming the fix, and the probe, which could
// only fail the same way, is skipped.
func diagnose(ctx context.Context, st *openedStore, noSchema error) doctorReport {
	m := st.Store.Model()
	ttl := probeTTL(m)
	rep := doctorReport{Target: st.Desc, Safe: true, Model: describeModel(m, ttl)}
	if noSchema != nil {
		why := noSchema
		if te := (*textError)(nil); errors.As(noSchema, &te) {
			why = te.err // the store's error, without connect's sentence around it
		}
		rep.Checks = []check{{Name: "schema", Status: statusFail, Fix: schemaFix,
			Detail: "the lock tables are missing or outdated: " + strings.TrimPrefix(cliHints(oneLine(plain(why))), "refused by the store: ")}}
	} else {
		rep.Checks = probe(ctx, st.Store, ttl)
	}
	if d, ok := driver.As[driver.Doctor](st.Store); ok {
		for _, c := range d.Doctor(ctx, ttl) {
			c := check{Name: c.Name, Status: statusName(c.Status), Detail: cliHints(c.Detail)}
			if c.Detail != "" && noSchema != nil && c.Status == statusFail {
				c.Fix = schemaFix
			}
			rep.Checks = append(rep.Checks, c)
		}
	} else {
		rep.Checks = append(rep.Checks, check{Name: "store checks", Status: statusWarn,
			Detail: "this store offers no checks of its own (no driver.Doctor): only the probe above ran"})
	}
	for _, c := range rep.Checks {
		if c.Status == statusFail {
			rep.Safe = false
		}
	}
	return rep
}

// probeTTL is probeLease within the model's bounds, as the client would use it.
func probeTTL(m driver.Model) time.Duration {
	ttl := max(probeLease, m.MinTTL)
	if m.MaxTTL > 0 {
		ttl = min(ttl, m.MaxTTL)
	}
	return m.TTLFor(ttl)
}

func describeModel(m driver.Model, ttl time.Duration) modelReport {
	r := modelReport{MinTTL: m.MinTTL.String(), MaxTTL: "none", Granularity: m.Granularity.String(),
		ServerClock: m.ServerClock, Session: m.Session, ProbeLeaseMs: ttl.Milliseconds()}
	if m.MaxTTL > 0 {
		r.MaxTTL = m.MaxTTL.String()
	}
	if m.Session {
		r.SessionTTL = m.SessionTTL.String()
	}
	return r
}

// probe acquires, extends and releases a probe key with a fresh token
// (driver.Probe), one line per step with its round-trip time, and checks
// through the store's Inspector (if any) that the key is free afterwards.
// A failed step is a FAIL; a failed acquire ends the probe.
func probe(ctx context.Context, s driver.Mutex, ttl time.Duration) []check {
	key, steps := driver.Probe(ctx, s, ttl, true)
	var out []check
	released := false
	for _, st := range steps {
		name, rtt := "probe "+st.Name, st.Took.Round(10*time.Microsecond)
		if st.Err != nil {
			out = append(out, check{Name: name, Status: statusFail, Detail: fmt.Sprintf("probe key %s: %s after %v", key, oneLine(plain(st.Err)), rtt),
				Fix: "a lock cannot be used on this store until this works: see the store's checks below"})
			continue
		}
		detail := map[string]string{
			"acquire": fmt.Sprintf("granted (fence %d, ttl %v)", st.Grant.Fence, st.Grant.TTL.Round(time.Millisecond)),
			"extend":  fmt.Sprintf("extended (ttl %v)", st.Grant.TTL.Round(time.Millisecond)),
			"release": "released",
		}[st.Name]
		out = append(out, check{Name: name, Status: statusOK, Detail: fmt.Sprintf("%s in %v", detail, rtt)})
		released = st.Name == "release"
	}
	if in, ok := driver.As[driver.Inspector](s); ok && released {
		info, err := in.Inspect(ctx, key)
		switch {
		case errors.Is(err, errors.ErrUnsupported):
		case err != nil:
			out = append(out, check{Name: "probe inspect", Status: statusWarn, Detail: "cannot inspect the probe key: " + oneLine(plain(err))})
		case info.Held:
			out = append(out, check{Name: "probe inspect", Status: statusFail, Detail: "the probe key is still held after its release",
				Fix: "the store does not free released keys: do not use it for locks"})
		default:
			out = append(out, check{Name: "probe inspect", Status: statusOK, Detail: "the probe key is free after its release"})
		}
	}
	return out
}

func statusName(s driver.Status) string {
	switch s {
	case driver.OK:
		return statusOK
	case driver.Warn:
		return statusWarn
	}
	return statusFail
}

func printDoctor(w io.Writer, rep doctorReport) {
	fmt.Fprintf(w, "dlock doctor: %s\n", rep.Target)
	m := rep.Model
	clock := "client clocks (they must run at similar rates)"
	if m.ServerClock {
		clock = "the server's clock"
	}
	life := "per-key leases"
	if m.Session {
		life = "one session per client (session TTL " + m.SessionTTL + ")"
	}
	bounds := "TTL " + m.MinTTL + " to " + m.MaxTTL
	switch {
	case m.MaxTTL == "none" && m.MinTTL == "0s": // a session store: the session, not the TTL, keeps the lock
		bounds = "any TTL"
	case m.MaxTTL == "none":
		bounds = "TTL " + m.MinTTL + " or more"
	}
	gran := ", granularity " + m.Granularity
	if m.Granularity == "0s" { // no TTL to round (the SQL session locks)
		gran = ""
	}
	fmt.Fprintf(w, "model: %s%s; expiry on %s; %s\n\n", bounds, gran, clock, life)
	width := 16
	for _, c := range rep.Checks {
		width = max(width, len(c.Name))
	}
	for _, c := range rep.Checks {
		fmt.Fprintf(w, "  %-4s  %-*s  %s\n", c.Status, width, c.Name, c.Detail)
		if c.Fix != "" && c.Status != statusOK && !strings.Contains(c.Detail, "fix: ") {
			fmt.Fprintf(w, "        %-*s  fix: %s\n", width, "", c.Fix)
		}
	}
	if rep.Safe {
		fmt.Fprintln(w, "\nno unsafe setting found")
	} else {
		fmt.Fprintln(w, "\nUNSAFE: fix the FAIL lines above before relying on these locks")
	}
}
