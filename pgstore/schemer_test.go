package pgstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
)

// TestOpenSessionMode checks that mode=session opens the advisory-lock
// store: a holding excludes a second store, and the holding lives on a
// pinned connection (pg_locks shows an advisory lock while it is held).
func TestOpenSessionMode(t *testing.T) {
	s := server(t)
	url := s.URL() + "&table=open_session&migrate=true&mode=session"
	o, err := driver.Open(ctx(t), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer o.Close()
	if _, ok := o.Store.(*pgstore.SessionStore); !ok || !strings.Contains(o.Describe, "session lock") {
		t.Fatalf("mode=session opened %T (%q); want *SessionStore", o.Store, o.Describe)
	}
	o2, err := driver.Open(ctx(t), url)
	if err != nil {
		t.Fatalf("Open second: %v", err)
	}
	defer o2.Close()
	tk := tok()
	if _, err := o.Store.(driver.Mutex).Acquire(ctx(t), "k", tk, time.Minute); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	var ce *driver.ContendedError
	if _, err := o2.Store.(driver.Mutex).Acquire(ctx(t), "k", tok(), time.Minute); !errors.As(err, &ce) {
		t.Fatalf("second store's Acquire of a held key = %v; want ContendedError", err)
	}
	if err := o.Store.(driver.Mutex).Release(ctx(t), "k", tk); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, err := o2.Store.(driver.Mutex).Acquire(ctx(t), "k", tok(), time.Minute); err != nil {
		t.Fatalf("second store's Acquire after release: %v", err)
	}
}

// TestSchemer checks driver.Schemer on both stores: Schema is the package's
// Schema for the store's prefix, and Migrate creates it (idempotently) on a
// database that lacks it.
func TestSchemer(t *testing.T) {
	pool := newPool(t)
	st, err := pgstore.New(pool, pgstore.Options{Table: "schemer_t"})
	if err != nil {
		t.Fatal(err)
	}
	sc, ok := driver.As[driver.Schemer](driver.Mutex(st))
	if !ok {
		t.Fatal("Store is not a driver.Schemer")
	}
	if got, want := sc.Schema(), pgstore.Schema(pgstore.Options{Table: "schemer_t"}); got != want || !strings.Contains(got, "schemer_t_locks") {
		t.Fatalf("Schema() = %q; want the package's Schema for schemer_t", got)
	}
	for i := range 2 { // the second run finds everything and changes nothing
		if err := sc.Migrate(ctx(t)); err != nil {
			t.Fatalf("Migrate run %d: %v", i+1, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx(t), "SELECT count(*) FROM pg_class WHERE relname LIKE 'schemer_t_%'").Scan(&n); err != nil || n < 3 {
		t.Fatalf("objects after Migrate = %d, %v; want the table, sequence and row table", n, err)
	}
	ss, err := pgstore.NewSession(pool, pgstore.SessionOptions{Table: "schemer_t"})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close(ctx(t))
	if ss.Schema() != sc.Schema() {
		t.Fatal("the session store's Schema differs from the lease store's for one prefix")
	}
}
