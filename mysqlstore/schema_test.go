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
	for _, want := range []string{"app_locks_locks", "app_locks_fence", "app_locks_rows", "app_locks_rates", "app_locks_rwholds", "app_locks_rwkeys", "CREATE SEQUENCE IF NOT EXISTS"} {
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
	if _, err := s.AllowN(ctxT(t), "k", driver.RateLimit{Rate: 1, Period: time.Second, Burst: 1}, 1); !errors.Is(err, driver.ErrRefused) {
		t.Errorf("AllowN without schema: %v, want ErrRefused", err)
	}
	if _, err := s.AcquireRead(ctxT(t), "k", "t", time.Second); !errors.Is(err, driver.ErrRefused) {
		t.Errorf("AcquireRead without schema: %v, want ErrRefused", err)
	}
	if err := s.ReleaseRW(ctxT(t), "k", "t"); !errors.Is(err, driver.ErrRefused) {
		t.Errorf("ReleaseRW without schema: %v, want ErrRefused", err)
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

// TestMigrateAddsTheMarkColumns: a lease table of the shape before the
// waiter mark (created here with that DDL, holding a key) is refused with
// ErrRefused ("run Migrate"), not mistaken for a lock answer; Migrate adds
// the columns (twice: idempotent), keeps the row, and the store then locks
// on it: the old holding still excludes and the mark works. Schema prints
// the columns; Doctor's schema check fails before the upgrade, passes after.
func TestMigrateAddsTheMarkColumns(t *testing.T) {
	if ddl := mysqlstore.Schema(mysqlstore.Options{}); !strings.Contains(ddl, "next_owner BINARY(32)") || !strings.Contains(ddl, "ADD COLUMN IF NOT EXISTS next_due") {
		t.Errorf("Schema lacks the mark's columns:\n%s", ddl)
	}
	db := openDB(t, shared(t).DSN())
	p := uniqTable(t)
	for _, q := range []string{
		"CREATE TABLE " + p + `_locks (name VARBINARY(1024) NOT NULL, owner BINARY(32) NOT NULL, holds INT NOT NULL,
  fence BIGINT UNSIGNED NOT NULL, expires_at DATETIME(6) NOT NULL, PRIMARY KEY (name), KEY expires_at (expires_at)) ENGINE=InnoDB`,
		"CREATE SEQUENCE " + p + "_fence START WITH 8 INCREMENT BY 1 NO MAXVALUE NOCYCLE ENGINE=InnoDB",
		"CREATE TABLE " + p + "_rows (name VARBINARY(1024) NOT NULL, PRIMARY KEY (name)) ENGINE=InnoDB",
		// An old holding of token "old" (its digest), fence 7 (the sequence
		// is past it), live for a minute.
		"INSERT INTO " + p + "_locks VALUES ('k', UNHEX(SHA2('old', 256)), 1, 7, UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE)",
	} {
		if _, err := db.ExecContext(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}
	opts := mysqlstore.Options{Table: p}
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctxT(t), "k", "new", time.Second); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("Acquire on the old table: %v, want ErrRefused (run Migrate)", err)
	}
	schemaCheck := func() driver.Check {
		for _, c := range s.Doctor(ctxT(t), time.Second) {
			if c.Name == "schema" {
				return c
			}
		}
		t.Fatal("no schema check")
		return driver.Check{}
	}
	if c := schemaCheck(); c.Status != driver.Fail || !strings.Contains(c.Detail, "waiter mark") {
		t.Errorf("doctor on the old table: %v %s", c.Status, c.Detail)
	}
	for i := 0; i < 2; i++ {
		if err := mysqlstore.Migrate(ctxT(t), db, opts); err != nil {
			t.Fatalf("Migrate %d: %v", i+1, err)
		}
	}
	if c := schemaCheck(); c.Status != driver.OK {
		t.Errorf("doctor after Migrate: %v %s", c.Status, c.Detail)
	}
	var ce *driver.ContendedError
	if _, err := s.Acquire(ctxT(t), "k", "new", time.Minute); !errors.As(err, &ce) || ce.Retry <= 0 {
		t.Fatalf("Acquire of the old holding's key: %v, want contended with a hint", err)
	}
	if err := s.Release(ctxT(t), "k", "old"); err != nil {
		t.Fatalf("the old holder's release: %v", err)
	}
	g, err := s.Acquire(ctxT(t), "k", "new", time.Minute)
	if err != nil || g.Fence <= 7 {
		t.Fatalf("Acquire after the old holder's release: %+v, %v", g, err)
	}
}
