package mysqlstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/mysqlstore"
)

// TestPrivilegeDeniedIsRefused: a database user without the privileges the
// store needs gets an error matching driver.ErrRefused (which ends a
// wait at once: retrying cannot fix it), from Migrate without CREATE and
// from Acquire without UPDATE on the lock table. The control: the same
// calls by the store's usual user, on the same tables, succeed.
func TestPrivilegeDeniedIsRefused(t *testing.T) {
	s := shared(t)
	admin, opts := migrated(t, mysqlstore.Options{})
	user := "ro" + uniqTable(t)
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'pw'", user),
		fmt.Sprintf("GRANT SELECT ON %s.* TO '%s'@'%%'", mysqlserver.Database, user),
	} {
		if _, err := admin.ExecContext(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = admin.ExecContext(ctxT(t), fmt.Sprintf("DROP USER '%s'@'%%'", user)) })
	ro := openDB(t, fmt.Sprintf("%s:pw@tcp(%s)/%s?parseTime=true&interpolateParams=true", user, s.Addr(), mysqlserver.Database))

	if err := mysqlstore.Migrate(ctxT(t), ro, mysqlstore.Options{Table: uniqTable(t)}); !errors.Is(err, driver.ErrRefused) {
		t.Errorf("Migrate without CREATE: %v, want ErrRefused", err)
	}
	st, err := mysqlstore.New(ro, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Acquire(ctxT(t), "k", "read-only-token", time.Minute); !errors.Is(err, driver.ErrRefused) {
		t.Errorf("Acquire without UPDATE: %v, want ErrRefused", err)
	}

	// Control: the usual user, same tables.
	if err := mysqlstore.Migrate(ctxT(t), admin, mysqlstore.Options{Table: uniqTable(t)}); err != nil {
		t.Errorf("control: Migrate by the usual user: %v", err)
	}
	good, err := mysqlstore.New(admin, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if _, err := good.Acquire(ctxT(t), "k", "usual-token", time.Minute); err != nil {
		t.Errorf("control: Acquire by the usual user: %v", err)
	}
}
