package pgstore_test

import (
	"strings"
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/internal/pgbouncer"
	"example.com/dlock/pgstore"
)

// TestBouncerDoctor: doctor through PgBouncer. In transaction mode the
// pooler check sees two client connections share or swap backends while a
// transaction is allowed (Warn, naming transaction mode) and the
// notifications check sees its probe NOTIFY never arrive (Warn); in
// statement mode the pooler check sees its BEGIN refused (Warn, naming
// statement mode; before, Fail with PgBouncer's raw error) and
// notifications are deaf as in transaction mode; in session mode the pooler check sees only
// the port differ (Warn, naming session pooling) and the notifications
// check passes. The lock probe passes in both. A check that always warned,
// or never, fails one of the modes (TestDoctor has the direct case: all OK).
func TestBouncerDoctor(t *testing.T) {
	table := uniqTable(t, newPool(t))
	for _, tc := range []struct {
		mode          pgbouncer.Mode
		pooler        string // in the pooler check's text
		notifications driver.Status
	}{
		{pgbouncer.Transaction, "a pooler in transaction mode", driver.Warn},
		{pgbouncer.Statement, "a pooler in statement mode", driver.Warn},
		{pgbouncer.Session, "session pooling or a TCP proxy", driver.OK},
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
}
