package pgstore_test

import (
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/internal/pgbouncer"
	"example.com/dlock/pgstore"
)

// deafStore is a lease-table store without driver.Notifier and
// driver.PermitNotifier, as the store is behind PgBouncer in transaction or
// statement mode, where its Subscribe and SubscribePermits report
// notifications unsupported: the fields, shallower than the embedded
// store's methods, hide those methods.
type deafStore struct {
	reporting
	Subscribe        struct{}
	SubscribePermits struct{}
	SubscribeRW      struct{}
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

// TestSessionConformanceBouncer is the session store's conformance suite
// through PgBouncer in session mode, as TestSessionConformance runs it
// direct: each client a pool of its own, through one fault proxy in front
// of the bouncer (Pause holds the proxy's bytes both ways; Kill closes the
// client's sockets, after which PgBouncer's server_reset_query, DISCARD
// ALL by default, frees the advisory locks of the server connection it
// keeps). Transaction and statement pooling refuse session locks
// (TestBouncerSessionLock, TestBouncerStatementSessionLock).
func TestSessionConformanceBouncer(t *testing.T) {
	b := bouncer(t, pgbouncer.Session)
	sessMigrate(t, bouncedPool(t, b, 2))
	drivertest.Run(t, sessHarness(t, b.Addr(), func(addr string) string {
		return strings.Replace(b.URL(), b.Addr(), addr, 1) + "&default_query_exec_mode=exec"
	}, "the server (here PgBouncer's reset of the server connection) frees a dead client's advisory locks at once, "+
		"not after a session TTL: the case's 'still held right after the kill' does not hold"))
}
