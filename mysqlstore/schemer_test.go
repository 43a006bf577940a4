package mysqlstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestSchemer checks driver.Schemer on the lease store and the session
// lock: Schema is the package's for the store's prefix, and Migrate creates
// the schema on a database without it (a store on that prefix is refused
// before, works after), idempotently.
func TestSchemer(t *testing.T) {
	db := openDB(t, shared(t).DSN())
	opts := mysqlstore.Options{Table: uniqTable(t)}
	st, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	sc, ok := driver.As[driver.Schemer](driver.Mutex(st))
	if !ok {
		t.Fatal("Store is not a driver.Schemer")
	}
	if sc.Schema() != mysqlstore.Schema(opts) {
		t.Fatal("Schema() differs from the package's Schema for the store's prefix")
	}
	if _, err := st.Acquire(ctxT(t), "k", "t", time.Second); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("Acquire before Migrate = %v; want ErrRefused (no schema)", err)
	}
	for i := range 2 {
		if err := sc.Migrate(ctxT(t)); err != nil {
			t.Fatalf("Migrate run %d: %v", i+1, err)
		}
	}
	if _, err := st.Acquire(ctxT(t), "k", "t", time.Second); err != nil {
		t.Fatalf("Acquire after Migrate: %v", err)
	}
	ss, err := mysqlstore.NewSession(db, mysqlstore.SessionOptions{Table: opts.Table})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	if ss.Schema() != sc.Schema() {
		t.Fatal("the session lock's Schema differs from the lease store's for one prefix")
	}
}
