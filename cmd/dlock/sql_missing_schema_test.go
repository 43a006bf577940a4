package main

import (
	"strings"
	"testing"

	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/pgserver"
)

// checkMissingSchemaHints: on a fresh database (no lock tables), run and
// status say what a CLI user runs (`dlock schema --store URL --apply`),
// not the library's hint for Go callers (pgstore.Migrate,
// mysqlstore.Migrate); doctor reports the missing schema as a FAIL check
// with that fix and exits 78, instead of exiting 77 before its checks.
// Then, the schema applied (the control), doctor passes.
func checkMissingSchemaHints(t *testing.T, store string) {
	for _, args := range [][]string{
		{"run", "--store", store, "--key", "k", "--", "true"},
		{"status", "--store", store, "k"},
	} {
		r := runDlock(t, nil, args...)
		t.Logf("%s: %v", args[0], r)
		if r.code != ExitRefused || !strings.Contains(r.stderr, schemaFix) || strings.Contains(r.stderr, "Migrate") {
			t.Errorf("%s on a fresh database: want exit %d with %q and no Go hint: %v", args[0], ExitRefused, schemaFix, r)
		}
	}
	r := runDlock(t, nil, "doctor", "--store", store)
	t.Logf("doctor: %v", r)
	if r.code != ExitUnsafe || !strings.Contains(r.stdout, "FAIL  schema") || !strings.Contains(r.stdout, "fix: "+schemaFix) || strings.Contains(r.stdout+r.stderr, "Migrate") {
		t.Errorf("doctor on a fresh database: want exit %d with a FAIL schema line and its fix: %v", ExitUnsafe, r)
	}
	if r := runDlock(t, nil, "schema", "--store", store, "--apply"); r.code != 0 {
		t.Fatalf("schema --apply: %v", r)
	}
	if r := runDlock(t, nil, "doctor", "--store", store); strings.Contains(r.stdout, "FAIL  schema") || r.code == ExitRefused {
		t.Errorf("doctor after schema --apply: %v", r)
	}
}

func TestMissingSchemaHintsPostgres(t *testing.T) {
	checkMissingSchemaHints(t, pgserver.Start(t).URL())
}

func TestMissingSchemaHintsMariaDB(t *testing.T) {
	checkMissingSchemaHints(t, mysqlserver.Start(t).URL())
}
