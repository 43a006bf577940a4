package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"example.com/dlock/driver"
)

func init() { subcommands = append(subcommands, newSchemaCmd) }

func newSchemaCmd() *cobra.Command {
	var (
		sf      storeFlags
		apply   bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Print the SQL a store needs (tables, sequence) for a DBA, or apply it with --apply",
		Long: `schema prints the statements that create what the store keeps its locks in
(for the SQL stores: the lease table, the fence sequence, the row-lock
table, the semaphore's permits table and the rate limiter's rates table,
named after the URL's ?table= prefix, default dlock), exactly as the store
would run them: idempotent (IF NOT EXISTS; CREATE OR REPLACE for
PostgreSQL's permits and rates functions), so a DBA can review them and
run them by hand. Printing makes no network call.

With --apply it runs them on the store's database (driver.Schemer's
Migrate): on a database that already has them it changes nothing; if it
fails half-way, running it again completes them. The SQL stores never
create their schema on their own; apply it once before the first lock.

Stores that create what they use as they go (Redis, etcd, ZooKeeper) have
no schema: schema says so and exits with 64.

Exit status: 0; 64 bad usage, or a store without a schema; 69 the database
could not be reached or failed during --apply; 77 the database refused
(a missing privilege, e.g. CREATE).

` + storeFlagsHelp,
		Example: `  dlock schema --store postgres://dlock:secret@127.0.0.1:5432/app
  dlock schema --store 'postgres://dlock:secret@127.0.0.1:5432/app?table=billing' > dlock.sql
  dlock schema --store mysql://dlock:secret@127.0.0.1:3306/app --apply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 || timeout > time.Hour {
				return exitWith(ExitUsage, fmt.Errorf("--timeout %v: want more than 0 and at most 1h", timeout))
			}
			sc, desc, closeSc, err := schemerFor(cmd.Context(), &sf)
			if err != nil {
				return err
			}
			if sc == nil {
				return noSchema(desc)
			}
			defer closeSc()
			if !apply {
				s := sc.Schema()
				if !strings.HasSuffix(s, "\n") {
					s += "\n"
				}
				_, err := fmt.Fprint(cmd.OutOrStdout(), s)
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := sc.Migrate(ctx); err != nil {
				return exitFor(fmt.Errorf("schema --apply on %s: %w", desc, err))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schema applied on %s\n", desc)
			return nil
		},
	}
	cmd.Flags().BoolVar(&apply, "apply", false, "run the statements on the store's database (idempotent)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "bound on --apply")
	sf.register(cmd)
	return cmd
}

// schemerFor returns the schema of the store sf selects, described by
// desc: the opened store's driver.Schemer. The store is opened without I/O
// (driver.OpenHints.NoIO: printing makes no network call; Migrate is the
// first). For a store without a schema sc is nil (and so is err); the
// schemaless schemes are answered so without opening the store. The caller
// calls closeFn when sc is not nil.
func schemerFor(ctx context.Context, sf *storeFlags) (sc driver.Schemer, desc string, closeFn func(), err error) {
	raw, err := sf.url()
	if err != nil {
		return nil, "", nil, err
	}
	if scheme := strings.ToLower(schemeOf(raw)); schemaless[scheme] {
		return nil, scheme + " store", nil, nil // known without dialing it
	}
	st, err := sf.open(driver.WithOpenHints(ctx, driver.OpenHints{NoIO: true}))
	if err != nil {
		return nil, "", nil, err
	}
	if sc, ok := driver.As[driver.Schemer](st.Store); ok {
		return sc, st.Desc, func() { _ = st.Close() }, nil
	}
	_ = st.Close()
	return nil, st.Desc, nil, nil
}

// schemaless are the schemes of this binary's stores that create what they
// use as they go: schema answers for them without opening the store (etcd
// and ZooKeeper stores dial when opened, driver.OpenHints.NoIO or not, and
// printing promises no network call). Other schemes are opened and asked
// for a driver.Schemer.
var schemaless = map[string]bool{
	"redis": true, "rediss": true, "redis+cluster": true, "rediss+cluster": true,
	"redis+sentinel": true, "rediss+sentinel": true, "redlock": true, "etcd": true, "etcds": true, "zk": true,
}

// noSchema is schema's answer for a store without one (ExitUsage).
func noSchema(desc string) error {
	return exitWith(ExitUsage, errors.New(desc+" has no schema: it creates what it uses as it goes (dlock schema is for the SQL stores: --store postgres://... or mysql://...)"))
}
