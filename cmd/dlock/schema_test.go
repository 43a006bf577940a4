package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// fakesql:// stores exist only in this test binary: a memstore with a
// driver.Schemer, to drive `dlock schema` in process.
//
//	fakesql://ok      Migrate succeeds (counted in fakeMigrations)
//	fakesql://down    Migrate fails as an unreachable database does
//	fakesql://denied  Migrate fails as a missing privilege does
const fakeDDL = "-- fake lease table\nCREATE TABLE IF NOT EXISTS %s_locks (name text PRIMARY KEY);"

var fakeMigrations atomic.Int64

type fakeSchemer struct {
	driver.Mutex
	table string
	err   error
}

func (f fakeSchemer) Schema() string { return fmt.Sprintf(fakeDDL, f.table) }

func (f fakeSchemer) Migrate(ctx context.Context) error {
	if f.err != nil {
		return f.err
	}
	fakeMigrations.Add(1)
	return ctx.Err()
}

func init() {
	driver.Register("fakesql", func(_ context.Context, u *url.URL) (*driver.Opened, error) {
		s := fakeSchemer{Mutex: memstore.New(nil), table: "dlock"}
		if t := u.Query().Get("table"); t != "" {
			s.table = t
		}
		switch u.Host {
		case "ok":
		case "down":
			s.err = fmt.Errorf("%w: dial tcp: connection refused", driver.ErrUnavailable)
		case "denied":
			s.err = fmt.Errorf("%w: permission denied for schema public", driver.ErrRefused)
		default:
			return nil, driver.ErrInvalid
		}
		return &driver.Opened{Store: s, Close: func() error { return nil }, Describe: "fakesql " + u.Host}, nil
	})
}

// schema prints the store's DDL with the URL's table prefix and applies
// nothing; --apply runs Migrate and says so; Migrate's failures map to
// their exit codes.
func TestSchemaPrintsAndApplies(t *testing.T) {
	before := fakeMigrations.Load()
	code, out, stderr := runCLI(t, "schema", "--store", "fakesql://ok?table=billing")
	if code != 0 || out != fmt.Sprintf(fakeDDL, "billing")+"\n" || stderr != "" {
		t.Fatalf("schema: code %d, stdout %q, stderr %q", code, out, stderr)
	}
	if fakeMigrations.Load() != before {
		t.Fatal("printing the schema applied it")
	}
	code, out, _ = runCLI(t, "schema", "--store", "fakesql://ok", "--apply")
	if code != 0 || !strings.Contains(out, "schema applied on fakesql ok") || fakeMigrations.Load() != before+1 {
		t.Fatalf("schema --apply: code %d, stdout %q, migrations %d", code, out, fakeMigrations.Load()-before)
	}
	for host, want := range map[string]int{"down": ExitUnavailable, "denied": ExitRefused} {
		code, _, stderr := runCLI(t, "schema", "--store", "fakesql://"+host, "--apply")
		if code != want || !strings.Contains(stderr, "schema --apply on fakesql "+host) {
			t.Errorf("%s: code %d (want %d), stderr %q", host, code, want, stderr)
		}
	}
}

// A store without a schema (memstore here; Redis, etcd, ZooKeeper) is a
// usage error, 64, with a message saying so, for printing and applying.
func TestSchemaOfStoreWithoutSchemaExits64(t *testing.T) {
	for _, args := range [][]string{{"schema", "--store", "mem://bare"}, {"schema", "--store", "mem://full", "--apply"},
		{"schema", "--redis", "redis://127.0.0.1:1"},
		// stores that dial when opened answer without a network call (nothing listens on port 1)
		{"schema", "--store", "etcd://127.0.0.1:1/p"}, {"schema", "--store", "zk://127.0.0.1:1/p"},
		{"schema", "--store", "ZK://127.0.0.1:1/p", "--apply"}} {
		code, out, stderr := runCLI(t, args...)
		if code != ExitUsage || out != "" || !strings.Contains(stderr, "has no schema") || !strings.Contains(stderr, "postgres://") {
			t.Errorf("%v: code %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "schema", "--store", "fakesql://ok", "--timeout", "0s"); code != ExitUsage {
		t.Errorf("--timeout 0: code %d, stderr %q", code, stderr)
	}
	if code, _, _ := runCLI(t, "schema", "--store", "fakesql://ok", "extra"); code != ExitUsage {
		t.Errorf("an argument: code %d", code)
	}
}

// The SQL adapters print the DDL of the URL's table prefix without a
// network call (nothing listens on port 1) and refuse a prefix their store
// refuses with a usage error, before any I/O.
func TestSchemaOfSQLURLsWithoutNetwork(t *testing.T) {
	for _, base := range []string{"postgres://u:secret@127.0.0.1:1/app?sslmode=disable", "mysql://u:secret@127.0.0.1:1/app"} {
		code, out, stderr := runCLI(t, "schema", "--store", withQuery(base, "table=billing"))
		if code != 0 || !strings.Contains(out, "billing_locks") || !strings.Contains(out, "billing_fence") || !strings.Contains(out, "billing_rows") {
			t.Errorf("%s: code %d, stdout %q, stderr %q", base, code, out, stderr)
		}
		code, out, stderr = runCLI(t, "schema", "--store", withQuery(base, "table=Bad-Name"))
		if code != ExitUsage || out != "" || strings.Contains(stderr, "secret") {
			t.Errorf("%s with a bad prefix: code %d, stdout %q, stderr %q", base, code, out, stderr)
		}
	}
}
