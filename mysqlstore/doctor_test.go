package mysqlstore_test

import (
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestDoctor: on the test server every check passes for both modes (the
// server is writable, not a replica, MariaDB 10.11); a store on a prefix
// without schema fails the schema check (the control: the check can fail).
func TestDoctor(t *testing.T) {
	s := newStore(t, mysqlstore.Options{})
	for _, c := range s.Doctor(ctxT(t), time.Second) {
		if c.Status != driver.OK {
			t.Errorf("%s: %v %s", c.Name, c.Status, c.Detail)
		}
		t.Logf("%s: %s", c.Name, c.Detail)
	}
	_, opts := migrated(t, mysqlstore.Options{})
	sess := newSession(t, opts.Table, mysqlstore.SessionOptions{})
	for _, c := range sess.Doctor(ctxT(t), time.Second) {
		if c.Status != driver.OK {
			t.Errorf("session %s: %v %s", c.Name, c.Status, c.Detail)
		}
	}
	bare, err := mysqlstore.New(openDB(t, shared(t).DSN()), mysqlstore.Options{Table: "nothere"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range bare.Doctor(ctxT(t), time.Second) {
		if c.Name == "schema" && (c.Status != driver.Fail || !strings.Contains(c.Detail, "Migrate")) {
			t.Errorf("schema check without schema: %v %s", c.Status, c.Detail)
		}
	}
}

// TestDoctorWarnsWithoutPermitsTables: a schema migrated before the
// semaphore (its permits table missing), before the idempotency records
// (their table missing), before the rate limiter (its rates table
// missing) or before the read-write lock (either of its tables missing)
// gets a warning from the schema check, naming the table and
// Migrate: locks work, the missing feature's calls would be refused.
// Control: TestDoctor, where the full schema passes.
func TestDoctorWarnsWithoutPermitsTables(t *testing.T) {
	for _, table := range []string{"_permits", "_idempotency", "_rates", "_rwholds", "_rwkeys"} {
		t.Run(table, func(t *testing.T) { doctorWarnsWithout(t, table) })
	}
}

func doctorWarnsWithout(t *testing.T, table string) {
	db, opts := migrated(t, mysqlstore.Options{})
	if _, err := db.Exec("DROP TABLE " + opts.Table + table); err != nil {
		t.Fatal(err)
	}
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range s.Doctor(ctxT(t), time.Second) {
		if c.Name == "schema" {
			found = true
			if c.Status != driver.Warn || !strings.Contains(c.Detail, "Migrate") || !strings.Contains(c.Detail, table) {
				t.Errorf("schema check without the %s table: %v %s", table, c.Status, c.Detail)
			}
		}
	}
	if !found {
		t.Fatal("no schema check")
	}
}
