package mysqlstore_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestSchemaAndMigrate: Schema names the prefixed objects; Migrate is
// idempotent (a second run changes nothing and fails nothing); bad
// prefixes and a nil pool are ErrInvalid before any I/O (Schema falls
// back to the default prefix); a store on a
// prefix without schema answers ErrRefused (run Migrate), not a lock
// answer.
func TestSchemaAndMigrate(t *testing.T) {
	ddl := mysqlstore.Schema(mysqlstore.Options{Table: "app_locks"})
	for _, want := range []string{"app_locks_locks", "app_locks_fence", "app_locks_rows", "CREATE SEQUENCE IF NOT EXISTS"} {
		if !strings.Contains(ddl, want) {
			t.Errorf("Schema lacks %q:\n%s", want, ddl)
		}
	}
	db, opts := migrated(t, mysqlstore.Options{})
	if err := mysqlstore.Migrate(ctxT(t), db, opts); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	for _, bad := range []string{"1x", "a-b", "x;DROP", strings.Repeat("a", 49)} {
		if ddl := mysqlstore.Schema(mysqlstore.Options{Table: bad}); !strings.Contains(ddl, "dlock_locks") || strings.Contains(ddl, bad) {
			t.Errorf("Schema(%q) does not fall back to the default prefix:\n%s", bad, ddl)
		}
		if _, err := mysqlstore.New(db, mysqlstore.Options{Table: bad}); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("New(%q): %v", bad, err)
		}
	}
	if _, err := mysqlstore.New(nil, mysqlstore.Options{}); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("New(nil): %v", err)
	}
	var nilDB *sql.DB
	if err := mysqlstore.Migrate(ctxT(t), nilDB, opts); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Migrate(nil): %v", err)
	}
	s, _ := mysqlstore.New(db, mysqlstore.Options{Table: "nothere"})
	if _, err := s.Acquire(ctxT(t), "k", "t", time.Second); !errors.Is(err, driver.ErrRefused) {
		t.Errorf("Acquire without schema: %v, want ErrRefused", err)
	}
	st, _ := mysqlstore.New(db, opts)
	for _, k := range []string{"", strings.Repeat("k", mysqlstore.MaxKeyBytes+1)} {
		if _, err := st.Acquire(ctxT(t), k, "t", time.Second); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("Acquire(key of %d bytes): %v", len(k), err)
		}
	}
	if _, err := st.Acquire(ctxT(t), "k", "", time.Second); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("empty token: %v", err)
	}
	if _, err := st.Acquire(ctxT(t), "k", "t", time.Microsecond); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("ttl 1µs: %v", err)
	}
}
