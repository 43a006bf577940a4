package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"example.com/dlock/cmd/dlock/internal/inventory"
)

func init() { subcommands = append(subcommands, newDemoCmd) }

type demoFlags struct {
	store      storeFlags
	requests   int
	instances  int
	strategies []string
	scenario   string
	work       time.Duration
	json       bool
	report     string
}

func newDemoCmd() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the articles' inventory demo: every lock strategy under 100 concurrent requests",
		Long: `Runs the source articles' scenario live: ProductStock_10000 starts at 100,
several instances of the stock service (separate processes) get N concurrent
requests per strategy, and a table shows which strategies lose updates, which
refuse requests, and which are correct.

Without --redis (or a redis:// --store; DLOCK_REDIS and DLOCK_STORE count
too) it starts an embedded Redis-protocol server (miniredis) on a loopback
port, and three more as Redlock nodes: nothing to install; that zero-setup
demo always runs on the embedded Redis.
The strategies are the articles' Redis ones, so the stock is in Redis:
--store redis:// or rediss://, --redis, --redis-cluster or --redis-sentinel
(and --redlock for the nodes of the redlock strategy).

With --store naming another lock store the demo adds that store's
strategy: the lock is dlock's over that store, and the stock stays in Redis
(the embedded one, unless --redis names one), written with the lock's
fence, so that a stale holder's write is refused:
  etcd       --store etcd://HOST:PORT[,HOST:PORT...]/PREFIX (etcdctl lock
             PREFIX/DistributedLock_10000 queues with it); fence: the key's
             CreateRevision; a crashed holder's lock is freed when its
             session expires (?session-ttl=, default 10s)
  zookeeper  --store zk://HOST:PORT[,HOST:PORT...]/PATH (Curator's
             InterProcessMutex on PATH/DistributedLock_10000 queues with
             it); a crashed holder's node goes with its session
             (?session-timeout=)
  sql-lease  --store postgres://USER:PASS@HOST:PORT/DB (or postgresql://)
             or mysql://USER:PASS@HOST:PORT/DB: the lease table, waiting
             in dlock; fence from the database's sequence (the demo
             applies the schema if missing, as dlock schema --apply)
and on an SQL --store also the articles' own database lock:
  sql-for-update  each sale in a transaction holding SELECT ... FOR UPDATE
             NOWAIT on the lock's row: requests that find it locked are
             refused at once (the table counts them), where sql-lease waits
             and sells them all
The crash scenario waits for the store to free the dead holder's lock.

Strategies, in the order the articles try them:
  nolock   read, write stock-1                 lost updates
  local    in-process mutex                    useless across instances
  v1       SETNX + DEL                         a crash leaves the lock forever
  v2       SET NX EX                           a slow holder deletes the next one's lock
  v3       owner token, GET then DEL           check-then-delete is not atomic
  v4       Lua compare-and-delete              work longer than the lease
  v5       v4 + renewal timer                  (Redis failover)
  redlock  RedLock.net: wait 20s, retry 1s, majority of the --redlock nodes
  dlock    this library: blocking Lock, watchdog, fenced write
  dlock-commit  the same with the stock read with the grant (WithRead) and
           written by the release (Commit), only while still held

Scenarios:
  contention   (default) a burst of N requests, 30 s leases
  slow-holder  holders keep the lock 1.25 leases (lease 600ms): v2 and v3 delete
               another holder's lock; v4, v5 and dlock do not
  crash        an instance is SIGKILLed holding the lock: v1 deadlocks, leases
               (300ms) expire and the survivors sell again
` + payScenarioHelp + rateScenarioHelp + `
` + storeFlagsHelp + `
For the demo, the default is the embedded server, not 127.0.0.1:6379.`,
		Example: `  dlock demo
  dlock demo --requests 200 --instances 3
  dlock demo --scenario crash --strategies v1,v2,dlock
  dlock demo --redis redis://127.0.0.1:6379 --json
  dlock demo --store 'etcd://127.0.0.1:2379/locks?session-ttl=2s' --strategies nolock,dlock,etcd
  dlock demo --store zk://127.0.0.1:2181/locks --strategies nolock,zookeeper
  dlock demo --store postgres://dlock:secret@127.0.0.1:5432/app --strategies sql-lease,sql-for-update
  dlock demo --store mysql://dlock:secret@127.0.0.1:3306/app --strategies sql-lease,sql-for-update
  dlock demo --report demo.html
  dlock demo --scenario pay-twice --json
  dlock demo --scenario rate-limit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDemo(cmd, &f) },
	}
	f.store.register(cmd)
	fl := cmd.Flags()
	fl.IntVar(&f.requests, "requests", 0, "requests per strategy (default: 100; slow-holder 12, crash 20; pay-twice: orders, 20; rate-limit: threads per instance, 10)")
	fl.IntVar(&f.instances, "instances", 2, "inventory service instances (separate processes), at least 2")
	fl.StringSliceVar(&f.strategies, "strategies", inventory.Strategies, "strategies to run, comma-separated")
	fl.StringVar(&f.scenario, "scenario", "contention", "contention, slow-holder, crash, pay-twice or rate-limit")
	fl.DurationVar(&f.work, "work", time.Millisecond, "pause between reading and writing the stock (contention, crash)")
	fl.BoolVar(&f.json, "json", false, "print the results as JSON")
	fl.StringVar(&f.report, "report", "", "write a self-contained HTML report to this file: what each strategy does and proves, verdicts, charts")
	return cmd
}

// demoOutput is the --json document.
type demoOutput struct {
	Server    string             `json:"server"`
	Embedded  bool               `json:"embedded"`
	Scenario  string             `json:"scenario"`
	Instances int                `json:"instances"`
	Results   []inventory.Result `json:"results"`
}

func (f *demoFlags) validate() (inventory.Scenario, error) {
	sc, err := inventory.Scenarios(f.scenario, f.requests, f.work)
	switch {
	case err != nil:
		return sc, err
	case f.requests < 0 || f.requests > 100000:
		return sc, fmt.Errorf("--requests %d: want 1-100000", f.requests)
	case f.instances < 2 || f.instances > 32:
		return sc, fmt.Errorf("--instances %d: want 2-32", f.instances)
	case f.work < 0 || f.work > time.Minute:
		return sc, fmt.Errorf("--work %v: want 0-1m", f.work)
	}
	known := append(slices.Clip(inventory.Strategies), f.store.demoStoreStrategies()...)
	for _, s := range f.strategies {
		switch {
		case slices.Contains(known, s):
		case s == inventory.SQLForUpdateStrategy && inventory.IsSQLScheme(schemeOf(f.store.storeURL)):
			return sc, fmt.Errorf("--strategies: %s: this build has no row lock for %s:// stores", s, schemeOf(f.store.storeURL))
		case inventory.NeedsStore(s) != "":
			return sc, fmt.Errorf("--strategies: %s needs %s", s, inventory.NeedsStore(s))
		default:
			return sc, fmt.Errorf("--strategies: unknown %q (want some of %s)", s, strings.Join(known, ","))
		}
	}
	return sc, nil
}

// demoStoreStrategies lists the store strategies that f's --store makes
// available: the strategy of its kind (etcd, zookeeper, sql-lease), and
// sql-for-update on an SQL database whose row lock this build has.
func (f *storeFlags) demoStoreStrategies() []string {
	var out []string
	if s := f.lockStoreStrategy(); s != "" {
		out = append(out, s)
	}
	if inventory.IsSQLScheme(schemeOf(f.storeURL)) && hasRowLocker(f.storeURL) {
		out = append(out, inventory.SQLForUpdateStrategy)
	}
	return out
}

func runDemo(cmd *cobra.Command, f *demoFlags) error {
	switch f.scenario {
	case payScenario:
		return runPayDemo(cmd, f)
	case rateScenario:
		return runRateDemo(cmd, f)
	}
	if !cmd.Flags().Changed("strategies") {
		f.strategies = append(slices.Clip(inventory.Strategies), f.store.demoStoreStrategies()...)
	}
	sc, err := f.validate()
	if err != nil {
		return exitWith(ExitUsage, err)
	}
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()
	env, server, embeddedAddr, cleanup, err := demoStore(ctx, &f.store, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	embedded := embeddedAddr != ""
	shown := server
	if embedded { // a hint for the terminal, not part of the server's name (JSON, report title)
		shown += "; pass --redis URL to use a real Redis"
	}
	if f.json { // keep stdout pure JSON; the document names the server too
		fmt.Fprintln(stderr, "dlock demo: store:", shown)
	} else {
		fmt.Fprintln(cmd.OutOrStdout(), "store:", shown)
	}
	insts, err := demoStartInstances(ctx, env, f.instances)
	defer func() {
		for _, in := range insts {
			in.Stop()
		}
	}()
	if err != nil {
		return exitWith(ExitUnavailable, err)
	}
	var progress io.Writer
	if fd, ok := stderr.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(fd.Fd())) {
		progress = stderr // bars only for people watching, not in logs
	}
	load := &inventory.Load{Progress: progress,
		Restart: func(ctx context.Context, i int) error { return insts[i].Restart(ctx) }}
	for _, in := range insts {
		load.Targets = append(load.Targets, in.URL)
	}
	results, err := load.Run(ctx, sc, f.strategies)
	if err != nil {
		return exitWith(ExitUnavailable, err)
	}
	if f.report != "" {
		// The report is read later: the embedded server's random port means nothing then.
		run := inventory.RunInfo{Scenario: sc.Name, Instances: f.instances, Store: server}
		if embedded {
			run.Store = strings.Replace(server, " on "+embeddedAddr, "", 1)
		}
		if err := demoWriteReport(f.report, run, results); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "dlock demo: wrote", f.report)
	}
	return printDemo(cmd.OutOrStdout(), f, demoOutput{Server: server, Embedded: embedded,
		Scenario: sc.Name, Instances: f.instances, Results: results})
}

func printDemo(w io.Writer, f *demoFlags, out demoOutput) error {
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(w, "scenario: %s, %d instances, stock %d\n\n", out.Scenario, out.Instances, inventory.InitialStock)
	return inventory.WriteTable(w, out.Results)
}

func demoWriteReport(path string, run inventory.RunInfo, rs []inventory.Result) error {
	file, err := os.Create(path)
	if err != nil {
		return exitWith(ExitUsage, fmt.Errorf("--report: %w", err))
	}
	err = inventory.WriteReport(file, run, rs)
	return errors.Join(err, file.Close())
}

// demoStore picks the Redis the instances use: the flags', or embedded
// servers, and the lock store of the store strategies when --store names
// one (etcd://, zk://, postgres://, mysql://; checked to answer; the stock
// stays in that Redis). It returns the environment that passes the choice
// to the instances (never on their command line, where passwords would
// show). A lock store with a schema (the SQL stores) gets it applied
// (idempotent, as `dlock schema --apply`), said on log. embeddedAddr is the
// embedded server's address, "" when the flags name a Redis.
func demoStore(ctx context.Context, f *storeFlags, log io.Writer) (env []string, server, embeddedAddr string, cleanup func(), err error) {
	rf := f.withoutLockStore()
	if rf.storeURL != "" || rf.redisURL != "" || rf.clusterURL != "" || rf.sentinelURL != "" {
		cleanup = func() {}
		env, server, err = demoRedis(ctx, rf)
	} else {
		env, server, embeddedAddr, cleanup, err = demoEmbedded(rf)
	}
	if err != nil {
		return nil, "", "", cleanup, err
	}
	if u := f.lockStoreURL(); u != "" {
		if err := demoMigrate(ctx, u, log); err != nil {
			return nil, "", "", cleanup, err
		}
		lst, err := openLockStore(ctx, f)
		if err != nil {
			return nil, "", "", cleanup, err
		}
		names, what := f.demoStoreStrategies(), " strategy's lock on "
		if len(names) > 1 {
			what = " strategies' locks on "
		}
		server += "; " + strings.Join(names, " and ") + what + lst.Desc
		_ = lst.Close()
		env = setEnv(env, "DLOCK_STORE", u)
	}
	return env, server, embeddedAddr, cleanup, nil
}

// demoMigrate applies the schema of a store that has one (driver.Schemer:
// the SQL stores), so that the demo needs no step before it; it is
// idempotent and changes nothing on a database that has it. Stores without
// a schema are left alone.
func demoMigrate(ctx context.Context, rawURL string, log io.Writer) error {
	sc, desc, closeSc, err := schemerFor(ctx, &storeFlags{storeURL: rawURL})
	if err != nil || sc == nil {
		return err
	}
	defer closeSc()
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := sc.Migrate(mctx); err != nil {
		return exitFor(fmt.Errorf("applying the schema of %s: %w", desc, err))
	}
	fmt.Fprintln(log, "dlock demo: the schema of", desc, "is in place (applied if missing; dlock schema --store URL prints it)")
	return nil
}

// setEnv returns env with name=value, replacing an earlier setting of name.
func setEnv(env []string, name, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, e := range env {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return append(out, name+"="+value)
}

// demoRedis checks the Redis the flags name (and the --redlock nodes) and
// returns the instances' environment and the store's description.
func demoRedis(ctx context.Context, f *storeFlags) (env []string, server string, err error) {
	primary, nodes, desc, err := inventoryClients(f)
	if err != nil {
		return nil, "", err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	svc, err := inventory.New(inventory.Config{Redis: primary, RedlockNodes: nodes})
	if err == nil {
		err = svc.Ping(pctx)
		_ = svc.Close()
	}
	closeClients(append(nodes, primary))
	if err != nil {
		return nil, "", exitWith(ExitUnavailable, err)
	}
	env = []string{"DLOCK_PREFIX=" + f.prefix, "DLOCK_STORE=" + f.storeURL, "DLOCK_REDIS=" + f.redisURL, "DLOCK_REDIS_CLUSTER=" + f.clusterURL,
		"DLOCK_REDIS_SENTINEL=" + f.sentinelURL, "DLOCK_REDLOCK=" + strings.Join(f.redlockURLs, ",")}
	return env, desc, nil
}

// demoEmbedded starts the embedded servers: one for the stock and the
// locks, three for Redlock (unless --redlock names nodes). addr is the
// first one's address.
func demoEmbedded(f *storeFlags) (env []string, server, addr string, cleanup func(), err error) {
	var servers []*inventory.Embedded
	cleanup = func() {
		for _, s := range servers {
			s.Close()
		}
	}
	var redlock []string
	for i := 0; i < 4; i++ {
		s, err := inventory.StartEmbedded()
		if err != nil {
			return nil, "", "", cleanup, exitWith(ExitUnavailable, err)
		}
		servers = append(servers, s)
		if i > 0 {
			redlock = append(redlock, s.URL())
		}
	}
	if len(f.redlockURLs) > 0 {
		redlock = f.redlockURLs
	}
	server = fmt.Sprintf("embedded Redis-protocol server (miniredis) on %s, Redlock over %d nodes",
		servers[0].Addr(), len(redlock))
	env = []string{"DLOCK_PREFIX=" + f.prefix, "DLOCK_STORE=", "DLOCK_REDIS=" + servers[0].URL(), "DLOCK_REDIS_CLUSTER=", "DLOCK_REDIS_SENTINEL=",
		"DLOCK_REDLOCK=" + strings.Join(redlock, ",")}
	return env, server, servers[0].Addr(), cleanup, nil
}

// demoStartInstances re-executes this binary as `dlock inventory serve`.
func demoStartInstances(ctx context.Context, env []string, n int) ([]*inventory.Instance, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var insts []*inventory.Instance
	for i := 1; i <= n; i++ {
		in, err := inventory.StartInstance(ctx, env, exe, "inventory", "serve", "--port", "0",
			"--name", fmt.Sprintf("instance-%d", i), "--allow-crash")
		if err != nil {
			return insts, err
		}
		insts = append(insts, in)
	}
	return insts, nil
}
