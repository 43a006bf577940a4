package mysqlstore_test

import (
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestMigrateAddsTheTookColumn: a records table from before took (the
// column dropped here, with an in-flight record in it) gains the column
// from Migrate (twice: idempotent); the record's resent begin then starts
// it as before, with its fence, not as a takeover.
func TestMigrateAddsTheTookColumn(t *testing.T) {
	db := openDB(t, shared(t).DSN())
	opts := mysqlstore.Options{Table: uniqTable(t)}
	if err := mysqlstore.Migrate(ctxT(t), db, opts); err != nil {
		t.Fatal(err)
	}
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	id := driver.RecordID{Key: "k"}
	first, err := s.BeginRecord(ctxT(t), id, "a", "fp", time.Minute, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctxT(t), "ALTER TABLE "+opts.Table+"_idempotency DROP COLUMN took"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := mysqlstore.Migrate(ctxT(t), db, opts); err != nil {
			t.Fatalf("Migrate %d: %v", i+1, err)
		}
	}
	again, err := s.BeginRecord(ctxT(t), id, "a", "fp", time.Minute, time.Minute)
	if err != nil || again.State != driver.RecordStarted || again.Fence != first.Fence || again.TookOver {
		t.Fatalf("resent begin after Migrate = %+v, %v; want started, fence %d, not took over", again, err, first.Fence)
	}
}
