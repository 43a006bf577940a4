package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// counterTable creates a one-row counter table for the lost-update tests.
func counterTable(t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	name := table + "_counter"
	if _, err := db.Exec("CREATE TABLE " + name + " (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO " + name + " VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	return name
}

// increment reads the counter, widens the race window on the server (a
// 2 ms SLEEP between read and write), and writes read+1.
func increment(tx *sql.Tx, counter string) error {
	var v int
	if err := tx.QueryRow("SELECT v FROM " + counter + " WHERE id = 1").Scan(&v); err != nil {
		return err
	}
	if _, err := tx.Exec("DO SLEEP(0.002)"); err != nil {
		return err
	}
	_, err := tx.Exec("UPDATE "+counter+" SET v = ? WHERE id = 1", v+1)
	return err
}

// lostUpdates runs workers × rounds read-modify-write increments through
// do and returns how many increments were lost.
func lostUpdates(t *testing.T, db *sql.DB, counter string, do func(fn func(*sql.Tx) error) error) int {
	const workers, rounds = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := do(func(tx *sql.Tx) error { return increment(tx, counter) }); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("increment: %v", err)
	}
	var v int
	if err := db.QueryRow("SELECT v FROM " + counter + " WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return workers*rounds - v
}

// TestRowLockNoLostUpdate: 8 workers × 10 read-modify-write increments
// under WithRowLock lose none. Negative control: the same increments in
// plain READ COMMITTED transactions (no FOR UPDATE) lose some.
func TestRowLockNoLostUpdate(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	locked := counterTable(t, db, opts.Table+"a")
	lost := lostUpdates(t, db, locked, func(fn func(*sql.Tx) error) error {
		return mysqlstore.WithRowLock(ctxT(t), db, "counter", mysqlstore.RowLockOptions{Table: opts.Table}, fn)
	})
	if lost != 0 {
		t.Fatalf("%d increments lost under WithRowLock", lost)
	}
	plain := counterTable(t, db, opts.Table+"b")
	lost = lostUpdates(t, db, plain, func(fn func(*sql.Tx) error) error {
		tx, err := db.BeginTx(ctxT(t), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	})
	if lost == 0 {
		t.Fatal("negative control: plain transactions lost no increment; the test cannot tell a lock from none")
	}
	t.Logf("negative control lost %d of 80 increments", lost)
}

// TestRowLockNoWaitAndRollback: while one transaction holds the row, a
// NoWait attempt fails at once with ErrNotAcquired (fn not run) and a wait
// bounded by a 1 s context fails after it; fn's error rolls its writes
// back; a bad key is ErrInvalid.
func TestRowLockNoWaitAndRollback(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	ro := mysqlstore.RowLockOptions{Table: opts.Table}
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- mysqlstore.WithRowLock(ctxT(t), db, "k", ro, func(*sql.Tx) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ran := false
	start := time.Now()
	err := mysqlstore.WithRowLock(ctxT(t), db, "k", mysqlstore.RowLockOptions{Table: opts.Table, NoWait: true}, func(*sql.Tx) error { ran = true; return nil })
	if !errors.Is(err, driver.ErrNotAcquired) || ran || time.Since(start) > 2*time.Second {
		t.Fatalf("NoWait on a held row: %v after %v, fn ran %v", err, time.Since(start), ran)
	}
	c, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = mysqlstore.WithRowLock(c, db, "k", ro, func(*sql.Tx) error { ran = true; return nil })
	if err == nil || ran {
		t.Fatalf("bounded wait on a held row: %v, fn ran %v", err, ran)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	counter := counterTable(t, db, opts.Table)
	boom := errors.New("boom")
	err = mysqlstore.WithRowLock(ctxT(t), db, "k", ro, func(tx *sql.Tx) error {
		if _, err := tx.Exec("UPDATE " + counter + " SET v = 99"); err != nil {
			return err
		}
		return boom
	})
	var v int
	if qerr := db.QueryRow("SELECT v FROM " + counter).Scan(&v); !errors.Is(err, boom) || qerr != nil || v != 0 {
		t.Fatalf("fn error: %v; counter %d (%v), want boom and 0", err, v, qerr)
	}
	if err := mysqlstore.WithRowLock(ctxT(t), db, "", ro, func(*sql.Tx) error { return nil }); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("empty key: %v", err)
	}
}

// TestRowLockLostHolderCannotWrite: a holder inside WithRowLock loses its
// connection (KILL CONNECTION, what the server does to a frozen client
// after wait_timeout, or a network cut) before it writes. Invariants: a
// waiter then gets the row, and the holder's write through its tx fails
// and is not applied: the lock and the write commit together or not at
// all. Negative control: the same holder writing through the pool (not
// its tx) after the loss overwrites the waiter's write.
func TestRowLockLostHolderCannotWrite(t *testing.T) {
	v, herr := lostHolderWrites(t, true)
	if herr == nil || v != 1 {
		t.Fatalf("through the tx: holder error %v, counter %d; want an error and 1 (the waiter's write only)", herr, v)
	}
	if v, _ = lostHolderWrites(t, false); v != 1000 { // its commit fails, but the write is in
		t.Fatalf("control (write outside the tx): counter %d; want the stale write applied (1000)", v)
	}
}

// lostHolderWrites runs the scenario and returns the counter and the
// holder's error. viaTx: the holder writes through its tx, else through db.
func lostHolderWrites(t *testing.T, viaTx bool) (int, error) {
	db, opts := migrated(t, mysqlstore.Options{})
	counter := counterTable(t, db, opts.Table)
	ro := mysqlstore.RowLockOptions{Table: opts.Table}
	held, killed := make(chan int64, 1), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		holder <- mysqlstore.WithRowLock(ctxT(t), db, "k", ro, func(tx *sql.Tx) error {
			var id int64
			if err := tx.QueryRow("SELECT CONNECTION_ID()").Scan(&id); err != nil {
				return err
			}
			held <- id
			<-killed
			if !viaTx {
				_, err := db.Exec("UPDATE " + counter + " SET v = 1000")
				return err
			}
			_, err := tx.Exec("UPDATE " + counter + " SET v = 1000")
			return err
		})
	}()
	id := <-held
	if _, err := db.Exec("KILL CONNECTION ?", id); err != nil {
		t.Fatal(err)
	}
	err := mysqlstore.WithRowLock(ctxT(t), db, "k", ro, func(tx *sql.Tx) error {
		_, err := tx.Exec("UPDATE " + counter + " SET v = v + 1")
		return err
	})
	if err != nil {
		t.Fatalf("waiter after the holder's connection died: %v", err)
	}
	close(killed)
	herr := <-holder
	var v int
	if err := db.QueryRow("SELECT v FROM " + counter).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v, herr
}

// TestRowLockFirstUsesOnAFullPool: as many first uses (rows not yet
// created) as the pool has connections, at once, all finish: creating a
// row never needs a second connection while a transaction holds one. The
// old code (INSERT on the pool from inside the transaction) had every
// caller wait for a connection until its context ended.
func TestRowLockFirstUsesOnAFullPool(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	const n = 3
	db.SetMaxOpenConns(n)
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	start := time.Now()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- mysqlstore.WithRowLock(ctx, db, fmt.Sprintf("first-%d", i), mysqlstore.RowLockOptions{Table: opts.Table}, func(tx *sql.Tx) error { return nil })
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("WithRowLock on a pool of %d: %v", n, err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("%d first uses on a pool of %d took %v", n, n, d)
	}
}
