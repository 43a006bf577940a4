package main

import (
	"testing"

	"example.com/dlock/cmd/dlock/internal/inventory"
	"example.com/dlock/internal/mysqlserver"
)

// TestMariaDBCLI drives the CLI against a real MariaDB
// (internal/mysqlserver): schema, then every command, then the demo (on a
// table prefix nobody migrated: the demo applies the schema).
func TestMariaDBCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary against a real MariaDB")
	}
	store := mysqlserver.Start(t).URL()
	t.Run("schema", func(t *testing.T) { checkSchema(t, store, "CREATE SEQUENCE IF NOT EXISTS") })
	t.Run("commands", func(t *testing.T) { checkStoreCommands(t, store) })
	t.Run("demo", func(t *testing.T) { checkDemoStore(t, withQuery(store, "table=demo"), inventory.SQLLeaseStrategy) })
}
