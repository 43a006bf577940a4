package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/mysqlstore"
)

// TestFaultHolderStopped: the holder is a child process (this test binary
// run again), SIGSTOPped past its lease while this process takes the key,
// then continued.
//
// Lease: the stopped holder's write, fenced with its older fence, changes
// no row; the new holder's stays. Control: the same holder's write without
// the fence condition overwrites.
//
// RowLock (IdleTimeout 1s): the server kills the stopped holder's idle
// transaction, the next locker gets the row, and the holder's write, made
// in its transaction before the stop, never becomes visible: its commit
// fails. Control: a write the holder makes outside the transaction after
// it continues lands.
//
// RowLockNoTimeout (negative control of the option): without IdleTimeout
// the stopped holder keeps the row for as long as it is stopped (3 s
// checked) and its commit then succeeds.
func TestFaultHolderStopped(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	data := opts.Table + "_data"
	if _, err := db.Exec("CREATE TABLE " + data + " (k VARCHAR(200) PRIMARY KEY, v VARCHAR(50) NOT NULL, fence BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	env := []string{"MYSQLSTORE_CHILD_DSN=" + shared(t).DSN("interpolateParams=true"), "MYSQLSTORE_CHILD_TABLE=" + opts.Table}
	t.Run("Lease", func(t *testing.T) { stopLease(t, db, opts, env) })
	t.Run("RowLock", func(t *testing.T) { stopRowLock(t, db, opts, env, true) })
	t.Run("RowLockNoTimeout", func(t *testing.T) { stopRowLock(t, db, opts, env, false) })
}

// dataValue reads k's value in the test's data table.
func dataValue(t *testing.T, db *sql.DB, table, k string) string {
	t.Helper()
	var v string
	if err := db.QueryRow("SELECT v FROM "+table+"_data WHERE k = ?", k).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// execN runs q and returns the rows it changed.
func execN(ctx context.Context, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, query string, args ...any) (int64, error) {
	r, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func stopLease(t *testing.T, db *sql.DB, opts mysqlstore.Options, env []string) {
	key := "lease"
	data := opts.Table + "_data"
	if _, err := db.Exec("INSERT INTO "+data+" (k, v) VALUES (?, 'init'), (?, 'init')", key, key+"/unfenced"); err != nil {
		t.Fatal(err)
	}
	c := roles.Start(t, t.Context(), "stop-lease", append(env, "MYSQLSTORE_CHILD_KEY="+key)...)
	oldFence, stopped := c.StopHolder("fence")
	other, _ := mysqlstore.New(db, opts)
	var g driver.Grant
	var err error
	if !faulttest.Within(10*time.Second, func() bool { g, err = other.Acquire(ctxT(t), key, "new", time.Minute); return err == nil }) {
		t.Fatalf("the stopped holder's 1 s lease did not end in 10 s: %v", err)
	}
	t.Logf("RESULT lease: next holder %v after the stop, fence %d > %d", time.Since(stopped).Round(time.Millisecond), g.Fence, oldFence)
	if g.Fence <= oldFence {
		t.Fatalf("new fence %d, old %d", g.Fence, oldFence)
	}
	if n, err := execN(ctxT(t), db, "UPDATE "+data+" SET v = 'new holder', fence = ? WHERE k = ? AND fence <= ?", g.Fence, key, g.Fence); n != 1 || err != nil {
		t.Fatalf("the new holder's fenced write changed %d rows: %v", n, err)
	}
	if _, err := db.Exec("UPDATE "+data+" SET v = 'new holder' WHERE k = ?", key+"/unfenced"); err != nil {
		t.Fatal(err)
	}
	faulttest.StaleLeaseWrite(c)
	if v := dataValue(t, db, opts.Table, key); v != "new holder" {
		t.Fatalf("fenced row = %q, want the new holder's", v)
	}
	if v := dataValue(t, db, opts.Table, key+"/unfenced"); v != "stopped holder" {
		t.Fatalf("control row = %q, want the stopped holder's (the control shows nothing)", v)
	}
}

// stopChildEnv is a stop child's pool (on MYSQLSTORE_CHILD_DSN), table
// and key, from its environment.
func stopChildEnv() (db *sql.DB, table, key string, err error) {
	db, err = childDB(os.Getenv("MYSQLSTORE_CHILD_DSN"), 4)
	return db, os.Getenv("MYSQLSTORE_CHILD_TABLE"), os.Getenv("MYSQLSTORE_CHILD_KEY"), err
}

// The lease child: acquire with a 1 s lease, say the fence, wait for a
// line, then write fenced and unfenced and say how many rows changed.
var _ = roles.Register("stop-lease", func() error {
	ctx := context.Background()
	db, table, key, err := stopChildEnv()
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := mysqlstore.New(db, mysqlstore.Options{Table: table})
	if err != nil {
		return err
	}
	g, err := st.Acquire(ctx, key, "stopped", time.Second)
	if err != nil {
		return err
	}
	return faulttest.StaleLeaseWriter(g.Fence, func() (int64, error) {
		return execN(ctx, db, "UPDATE "+table+"_data SET v = 'stopped holder', fence = ? WHERE k = ? AND fence <= ?", g.Fence, key, g.Fence)
	}, func() (int64, error) {
		return execN(ctx, db, "UPDATE "+table+"_data SET v = 'stopped holder' WHERE k = ?", key+"/unfenced")
	})
})

func stopRowLock(t *testing.T, db *sql.DB, opts mysqlstore.Options, env []string, timeout bool) {
	key := fmt.Sprint("row-", timeout)
	data := opts.Table + "_data"
	if _, err := db.Exec("INSERT INTO "+data+" (k, v) VALUES (?, 'init'), (?, 'init')", key, key+"/outside"); err != nil {
		t.Fatal(err)
	}
	idle := "0"
	if timeout {
		idle = "1s"
	}
	c := roles.Start(t, t.Context(), "stop-rowlock", append(env, "MYSQLSTORE_CHILD_KEY="+key, "MYSQLSTORE_CHILD_IDLE="+idle)...)
	c.Read("locked")
	c.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	take := func() error {
		return mysqlstore.WithRowLock(ctxT(t), db, key, mysqlstore.RowLockOptions{Table: opts.Table, NoWait: true}, func(tx *sql.Tx) error {
			_, err := tx.Exec("UPDATE "+data+" SET v = 'new holder' WHERE k = ?", key)
			return err
		})
	}
	var err error
	if !timeout {
		// The control: 3 s of NoWait attempts all find the row taken.
		if faulttest.Within(3*time.Second, func() bool { err = take(); return !errors.Is(err, driver.ErrNotAcquired) }) {
			t.Fatalf("without IdleTimeout the stopped holder's row was free (%v): the control shows nothing", err)
		}
		if commit, outside := faulttest.StaleCommit(c); commit != "ok" || outside != "1" {
			t.Fatalf("without IdleTimeout the holder's commit after the stop: %s, want ok (its write outside changed %s rows)", commit, outside)
		}
		if v := dataValue(t, db, opts.Table, key); v != "stopped holder" {
			t.Fatalf("row = %q, want the holder's write", v)
		}
		return
	}
	if !faulttest.Within(10*time.Second, func() bool { err = take(); return err == nil }) {
		t.Fatalf("the stopped holder's row is still locked 10 s after its 1 s idle timeout: %v", err)
	}
	t.Logf("RESULT row lock: the stopped holder's row taken %v after the stop", time.Since(stopped).Round(time.Millisecond))
	commit, outside := faulttest.StaleCommit(c)
	if commit == "ok" {
		t.Fatal("the stopped holder's transaction committed after another process took the row")
	}
	t.Logf("RESULT row lock: the continued holder's commit: %s", commit)
	if outside != "1" {
		t.Fatalf("control: the write outside the transaction changed %s rows, want 1", outside)
	}
	if v := dataValue(t, db, opts.Table, key); v != "new holder" {
		t.Fatalf("row = %q; want the new holder's write only", v)
	}
}

// The row-lock child: WithRowLock (IdleTimeout MYSQLSTORE_CHILD_IDLE),
// write inside the transaction, say "locked", wait for a line, commit and
// say how it went, then write outside any transaction (the control).
var _ = roles.Register("stop-rowlock", func() error {
	ctx := context.Background()
	db, table, key, err := stopChildEnv()
	if err != nil {
		return err
	}
	defer db.Close()
	idle, err := time.ParseDuration(os.Getenv("MYSQLSTORE_CHILD_IDLE"))
	if err != nil {
		return err
	}
	err = mysqlstore.WithRowLock(ctx, db, key, mysqlstore.RowLockOptions{Table: table, IdleTimeout: idle}, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE "+table+"_data SET v = 'stopped holder' WHERE k = ?", key); err != nil {
			return err
		}
		return faulttest.Locked()
	})
	return faulttest.StaleCommitter(err, func() (int64, error) {
		return execN(ctx, db, "UPDATE "+table+"_data SET v = 'stopped holder' WHERE k = ?", key+"/outside")
	})
})
