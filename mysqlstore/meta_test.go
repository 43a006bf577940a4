package mysqlstore_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

func metaTok() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// A holding's metadata is in its row's meta column, shown by any store
// while the row's fence is its own: a re-entry keeps the first, a later
// holding without metadata shows none although the column still has the
// earlier text, and a transfer drops it.
func TestMetaIsKeptInTheLeaseRow(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	other := newStoreOn(t, db, opts)
	a, b := metaTok(), metaTok()
	if _, err := s.Acquire(driver.WithMeta(ctxT(t), "host=a pid=1"), "k", a, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(driver.WithMeta(ctxT(t), "second"), "k", a, time.Minute); err != nil {
		t.Fatal(err)
	}
	info, err := other.Inspect(ctxT(t), "k")
	if err != nil || info.Meta != "host=a pid=1" || info.Holds != 2 {
		t.Fatalf("Inspect = %+v, %v; want the first holding's metadata", info, err)
	}
	if strings.Contains(info.Meta, a) {
		t.Fatal("metadata contains the token")
	}
	var listed driver.Info
	if err := other.List(ctxT(t), "k", func(_ string, i driver.Info) bool { listed = i; return true }); err != nil || listed.Meta != info.Meta {
		t.Fatalf("List: %+v, %v", listed, err)
	}
	for range 2 {
		if err := s.Release(ctxT(t), "k", a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Acquire(ctxT(t), "k", b, time.Minute); err != nil {
		t.Fatal(err)
	}
	var col []byte
	if err := db.QueryRowContext(ctxT(t), "SELECT COALESCE(meta, '') FROM "+opts.Table+"_locks WHERE name = 'k'").Scan(&col); err != nil || !strings.HasSuffix(string(col), ":host=a pid=1") {
		t.Fatalf("control: the column should still hold the earlier holding's metadata: %q, %v", col, err)
	}
	if info, err := other.Inspect(ctxT(t), "k"); err != nil || info.Meta != "" || !info.Held {
		t.Fatalf("a holding without metadata: Inspect = %+v, %v", info, err)
	}
	if err := s.Release(ctxT(t), "k", b); err != nil {
		t.Fatal(err)
	}

	if _, err := s.Acquire(driver.WithMeta(ctxT(t), "m"), "t", a, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transfer(ctxT(t), "t", a, b, time.Minute); err != nil {
		t.Fatal(err)
	}
	if info, err := other.Inspect(ctxT(t), "t"); err != nil || info.Meta != "" || !info.Held {
		t.Fatalf("after a transfer: Inspect = %+v, %v; want held without metadata", info, err)
	}
}

// newStoreOn is a second store on db's migrated table.
func newStoreOn(t *testing.T, db *sql.DB, opts mysqlstore.Options) *mysqlstore.Store {
	t.Helper()
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// On a lease table migrated before the meta column, locking with metadata,
// Inspect and List work as before (no metadata); Migrate adds the column,
// and the metadata is kept from then on.
func TestMetaOnATableWithoutTheColumn(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	if _, err := db.ExecContext(ctxT(t), "ALTER TABLE "+opts.Table+"_locks DROP COLUMN meta"); err != nil {
		t.Fatal(err)
	}
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	tk := metaTok()
	if _, err := s.Acquire(driver.WithMeta(ctxT(t), "m"), "k", tk, time.Minute); err != nil {
		t.Fatalf("Acquire with metadata on a table without the column: %v", err)
	}
	if info, err := s.Inspect(ctxT(t), "k"); err != nil || !info.Held || info.Meta != "" {
		t.Fatalf("Inspect = %+v, %v", info, err)
	}
	n := 0
	if err := s.List(ctxT(t), "", func(string, driver.Info) bool { n++; return true }); err != nil || n != 1 {
		t.Fatalf("List: %d keys, %v", n, err)
	}
	if err := s.Release(ctxT(t), "k", tk); err != nil {
		t.Fatal(err)
	}
	if err := mysqlstore.Migrate(ctxT(t), db, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(driver.WithMeta(ctxT(t), "m"), "k", tk, time.Minute); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Inspect(ctxT(t), "k"); err != nil || info.Meta != "m" {
		t.Fatalf("after Migrate: Inspect = %+v, %v", info, err)
	}
}
