package pgstore_test

import (
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/internal/pgbouncer"
	"example.com/dlock/pgstore"
)

// deafStore is a lease-table store without driver.Notifier, as the store is
// behind PgBouncer in transaction or statement mode, where its Subscribe reports
// notifications unsupported: the field Subscribe, shallower than the
// embedded store's method, hides that method.
type deafStore struct {
	reporting
	Subscribe struct{}
}

// TestConformanceBouncer is the conformance suite through PgBouncer, every
// client a store on a pool of its own through the bouncer (set as the docs
// say: default_query_exec_mode=exec). In session mode the store is whole;
// in transaction and statement mode it is without its notifications, which
// the probe turns off there (TestBouncerWait), so the notification cases
// are skipped as for a store that has none.
func TestConformanceBouncer(t *testing.T) {
	for _, mode := range []pgbouncer.Mode{pgbouncer.Session, pgbouncer.Transaction, pgbouncer.Statement} {
		t.Run(string(mode), func(t *testing.T) { conformanceBouncer(t, bouncer(t, mode)) })
	}
}

func conformanceBouncer(t *testing.T, b *pgbouncer.Bouncer) {
	srv := server(t)
	admin := newPool(t)
	table := uniqTable(t, admin)
	drivertest.Run(t, harness(srv, func(t *testing.T) (driver.Mutex, func()) {
		pool := bouncedPool(t, b, 0)
		s, err := pgstore.New(pool, pgstore.Options{Table: table, SweepInterval: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var m driver.Mutex = reporting{s, admin, table}
		if b.Mode != pgbouncer.Session {
			m = deafStore{reporting: reporting{s, admin, table}}
		}
		return m, func() { closeStore(s); pool.Close() }
	}))
}
