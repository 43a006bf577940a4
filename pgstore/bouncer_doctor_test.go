package pgstore_test

import (
	"strings"
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/pgbouncer"
	"example.com/dlock/pgstore"
)

// TestBouncerDoctor: doctor through PgBouncer; the pooler check names the
// pool mode it sees.
//
//   - transaction: two client connections share or swap backends while a
//     transaction is allowed (Warn, "a pooler in transaction mode"); the
//     notifications check sees its probe NOTIFY never arrive (Warn).
//   - statement: its BEGIN is refused (Warn, "a pooler in statement mode";
//     before, Fail with PgBouncer's raw FATAL); notifications deaf (Warn).
//   - session: a new client connection is given a backend older than
//     itself (Warn, "a pooler in session mode"; before, "session pooling
//     or a TCP proxy"); notifications OK.
//   - TCPProxyControl: through a TCP proxy in front of the server (every
//     connection a new backend) the check warns of a proxy but names no
//     pool mode: the session-mode verdict is not given to anything in
//     front. TestDoctor has the direct case: all OK.
//
// The lock probe passes in every mode.
func TestBouncerDoctor(t *testing.T) {
	table := uniqTable(t, newPool(t))
	for _, tc := range []struct {
		mode          pgbouncer.Mode
		pooler        string // in the pooler check's text
		notifications driver.Status
	}{
		{pgbouncer.Transaction, "a pooler in transaction mode", driver.Warn},
		{pgbouncer.Statement, "a pooler in statement mode", driver.Warn},
		{pgbouncer.Session, "a pooler in session mode", driver.OK},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			b := bouncer(t, tc.mode)
			checks := doctor(t, newStore(t, bouncedPool(t, b, 4), pgstore.Options{Table: table}))
			if c := checks["pooler"]; c.Status != driver.Warn || !strings.Contains(c.Detail, tc.pooler) {
				t.Errorf("pooler = %+v; want Warn saying %q", c, tc.pooler)
			}
			if c := checks["notifications"]; c.Status != tc.notifications {
				t.Errorf("notifications = %+v; want status %v", c, tc.notifications)
			}
			if c := checks["probe lock"]; c.Status != driver.OK {
				t.Errorf("probe lock = %+v; want OK", c)
			}
		})
	}
	t.Run("TCPProxyControl", func(t *testing.T) {
		p, err := faultproxy.New(server(t).Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		c := doctor(t, newStore(t, newPool(t, p.Addr()), pgstore.Options{Table: table}))["pooler"]
		if c.Status != driver.Warn || !strings.Contains(c.Detail, "a proxy or a pooler is in front") || strings.Contains(c.Detail, " mode") {
			t.Errorf("pooler through a TCP proxy = %+v; want Warn of a proxy naming no pool mode", c)
		}
	})
}
