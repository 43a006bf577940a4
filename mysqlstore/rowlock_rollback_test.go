package mysqlstore_test

import (
	"database/sql"
	"errors"
	"testing"

	"example.com/dlock/mysqlstore"
)

// TestRowLockRollsBackOnErrorAndPanic: fn's write commits with the lock
// when fn returns nil (the control), and rolls back when fn returns an
// error (returned as is) or panics (the panic goes on); either way the row
// is free again at once (a NoWait lock gets it).
func TestRowLockRollsBackOnErrorAndPanic(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	counter := counterTable(t, db, opts.Table)
	ro := mysqlstore.RowLockOptions{Table: opts.Table}
	write := func(tx *sql.Tx) error {
		_, err := tx.Exec("UPDATE " + counter + " SET v = v + 1 WHERE id = 1")
		return err
	}
	value := func() int {
		var v int
		if err := db.QueryRow("SELECT v FROM " + counter + " WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	free := func(when string) {
		nw := ro
		nw.NoWait = true
		if err := mysqlstore.WithRowLock(ctxT(t), db, "k", nw, func(*sql.Tx) error { return nil }); err != nil {
			t.Fatalf("the row after %s: %v", when, err)
		}
	}
	boom := errors.New("boom")
	if err := mysqlstore.WithRowLock(ctxT(t), db, "k", ro, func(tx *sql.Tx) error {
		if err := write(tx); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("fn's error: %v", err)
	}
	if v := value(); v != 0 {
		t.Fatalf("a failed fn's write was committed: %d", v)
	}
	free("a failed fn")
	func() {
		defer func() {
			if r := recover(); r != "panic in fn" {
				t.Fatalf("recovered %v, want fn's panic", r)
			}
		}()
		_ = mysqlstore.WithRowLock(ctxT(t), db, "k", ro, func(tx *sql.Tx) error {
			if err := write(tx); err != nil {
				return err
			}
			panic("panic in fn")
		})
	}()
	if v := value(); v != 0 {
		t.Fatalf("a panicking fn's write was committed: %d", v)
	}
	free("a panicking fn")
	if err := mysqlstore.WithRowLock(ctxT(t), db, "k", ro, write); err != nil {
		t.Fatal(err)
	}
	if v := value(); v != 1 {
		t.Fatalf("control: the write of a fn returning nil reads %d, want 1", v)
	}
}
