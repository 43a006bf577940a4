package main

import (
	"strings"
	"testing"

	"example.com/dlock/cmd/dlock/internal/inventory"
	"example.com/dlock/internal/pgserver"
)

// TestPostgresCLI drives the CLI against a real PostgreSQL
// (internal/pgserver): schema, then every command, then the demo.
func TestPostgresCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary against a real PostgreSQL")
	}
	store := pgserver.Start(t).URL()
	t.Run("schema", func(t *testing.T) { checkSchema(t, store, "CREATE SEQUENCE IF NOT EXISTS") })
	t.Run("commands", func(t *testing.T) { checkStoreCommands(t, store) })
	// The demo on a table prefix nobody migrated: it applies the schema.
	t.Run("demo", func(t *testing.T) { checkDemoStore(t, withQuery(store, "table=demo"), inventory.SQLLeaseStrategy) })
}

// checkSchema: before `schema --apply` the store cannot lock (status fails
// and is not 0); `schema` prints the DDL of the three objects named after
// the table prefix (want in it too) and changes nothing; `--apply` creates
// them, twice in a row (idempotent); then status works. store must be an
// SQL URL whose default prefix is not yet migrated.
func checkSchema(t *testing.T, store string, want ...string) {
	t.Helper()
	if r := runDlock(t, nil, "status", "--store", store, "k"); r.code == 0 {
		t.Errorf("status before the schema exists must fail: %s", r)
	}
	r := runDlock(t, nil, "schema", "--store", store)
	if r.code != 0 {
		t.Fatalf("schema: %s", r)
	}
	for _, w := range append([]string{"dlock_locks", "dlock_fence", "dlock_rows", "IF NOT EXISTS"}, want...) {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("schema output lacks %q:\n%s", w, r.stdout)
		}
	}
	t.Logf("dlock schema:\n%s", r.stdout)
	if p := runDlock(t, nil, "schema", "--store", withQuery(store, "table=billing")); p.code != 0 || !strings.Contains(p.stdout, "billing_locks") || strings.Contains(p.stdout, "dlock_locks") {
		t.Errorf("schema with table=billing: %s", p)
	}
	if r := runDlock(t, nil, "status", "--store", store, "k"); r.code == 0 {
		t.Errorf("printing the schema must not apply it: %s", r)
	}
	if r := runDlock(t, nil, "schema", "--store", withQuery(store, "table=Bad-Name"), "--apply"); r.code != ExitUsage || r.stdout != "" {
		t.Errorf("schema with an invalid table prefix: %s", r)
	}
	for i := 0; i < 2; i++ {
		if r := runDlock(t, nil, "schema", "--store", store, "--apply"); r.code != 0 || !strings.Contains(r.stdout, "schema applied on ") {
			t.Fatalf("schema --apply (%d): %s", i+1, r)
		}
	}
	if s := statusJSON(t, store, "k"); s.Held {
		t.Errorf("status after the schema: %+v", s)
	}
}

// withQuery adds the query parameter kv (k=v) to the URL u.
func withQuery(u, kv string) string {
	if strings.Contains(u, "?") {
		return u + "&" + kv
	}
	return u + "?" + kv
}
