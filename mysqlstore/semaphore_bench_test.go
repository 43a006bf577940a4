package mysqlstore_test

import (
	"testing"

	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/sqltest"
	"example.com/dlock/mysqlstore"
)

// BenchmarkPermitsCycle: the SQL stores' permits cycle benchmark
// (sqltest.BenchPermitsCycle) on the shared server, with
// interpolateParams=true (as the URL opener sets).
func BenchmarkPermitsCycle(b *testing.B) {
	_, opts := migrated(b, mysqlstore.Options{})
	sqltest.BenchPermitsCycle(b, shared(b).Addr(), func(b *testing.B, addr string) sqltest.PermitStore {
		s, err := mysqlstore.New(openDB(b, mysqlserver.DSNFor(addr, mysqlserver.Database, "interpolateParams=true")), opts)
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
