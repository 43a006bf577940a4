package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"example.com/dlock/mysqlstore/myguard"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// Tests of the SQL mode of the idempotency guard (Store.DoTx): a business
// table <prefix>_charges, one row per charge made, without any unique
// constraint, so that a second execution shows as a second row.

// chargesTable creates a migrated prefix and its business table, and
// returns the prefix and an admin pool.
func chargesTable(t *testing.T) (string, *sql.DB) {
	t.Helper()
	admin, opts := migrated(t, mysqlstore.Options{})
	if _, err := admin.ExecContext(ctxT(t), "CREATE TABLE "+opts.Table+"_charges (k VARCHAR(64) NOT NULL, fence BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	return opts.Table, admin
}

// execer is a transaction or a pool.
type execer interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}

// insertCharge is the business write: one row, through q.
func insertCharge(ctx context.Context, q execer, table, key string, fence uint64) error {
	_, err := q.ExecContext(ctx, "INSERT INTO "+table+"_charges (k, fence) VALUES (?, ?)", key, fence)
	return err
}

// charges counts the business rows of key.
func charges(t *testing.T, db *sql.DB, table, key string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM "+table+"_charges WHERE k = ?", key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// txGuard returns a store on a pool of its own over table and a Guard on it.
func txGuard(t *testing.T, table string, opts ...dlock.Option) (*mysqlstore.Store, *dlock.Guard) {
	t.Helper()
	s, err := mysqlstore.New(openDB(t, shared(t).DSN()), mysqlstore.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	g, err := dlock.NewGuard(s, time.Hour, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s, g
}

// TestDoTxTwentyCallsChargeOnce: 20 identical calls at once, on two stores
// (two instances), each charging inside DoTx: exactly one execution, one
// business row, and every caller gets its result. Control: the same 20
// calls charging in plain transactions make 20 rows (the race is real).
func TestDoTxTwentyCallsChargeOnce(t *testing.T) {
	for _, guarded := range []bool{true, false} {
		name := map[bool]string{true: "Guarded", false: "ControlUnguarded"}[guarded]
		t.Run(name, func(t *testing.T) {
			table, admin := chargesTable(t)
			var inst [2]struct {
				s *mysqlstore.Store
				g *dlock.Guard
			}
			for i := range inst {
				inst[i].s, inst[i].g = txGuard(t, table, dlock.WithWait(20*time.Second))
			}
			var executions atomic.Int32
			var mu sync.Mutex
			results, errs := map[string]int{}, []error(nil)
			charge := func(ctx context.Context, tx *sql.Tx, fence uint64) error {
				executions.Add(1)
				if _, err := tx.ExecContext(ctx, "DO SLEEP(0.02)"); err != nil { // work: widens the window
					return err
				}
				return insertCharge(ctx, tx, table, "order-1", fence)
			}
			gate := make(chan struct{})
			var wg sync.WaitGroup
			for i := range 20 {
				in := inst[i%2]
				wg.Go(func() {
					<-gate
					val, err := []byte("unguarded"), error(nil)
					if guarded {
						var r dlock.Result
						r, err = myguard.DoTx(ctxT(t), in.s, in.g, "order-1", "fp", func(ctx context.Context, tx *sql.Tx, e dlock.Execution) ([]byte, error) {
							return fmt.Appendf(nil, "charged at fence %d", e.Fence), charge(ctx, tx, e.Fence)
						})
						val = r.Value
					} else {
						err = plainTx(ctxT(t), admin, func(tx *sql.Tx) error { return charge(ctxT(t), tx, 0) })
					}
					mu.Lock()
					defer mu.Unlock()
					results[string(val)]++
					if err != nil {
						errs = append(errs, err)
					}
				})
			}
			close(gate)
			wg.Wait()
			n := charges(t, admin, table, "order-1")
			t.Logf("20 calls: %d executions, %d business rows, results %v", executions.Load(), n, results)
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("calls failed: %v", err)
			}
			switch {
			case guarded && (n != 1 || executions.Load() != 1 || len(results) != 1):
				t.Fatalf("guarded: %d business rows, %d executions, %d distinct results; want 1, 1, 1", n, executions.Load(), len(results))
			case !guarded && n <= 1:
				t.Fatalf("control: %d business rows from 20 unguarded calls; want more than 1", n)
			}
		})
	}
}

// plainTx runs fn in a transaction of db and commits it.
func plainTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// TestDoTxStaleExecutorRollsBack: executor A (a fixed lease of 300 ms)
// charges in its transaction, then stalls; B takes the record over after
// A's lease, charges and commits. When A resumes, its fence check fails:
// DoTx returns ErrLost and ErrStaleFence, A's charge is rolled back, and
// B's result is the one replayed. Control: without the fence check A's
// transaction commits and the charge is doubled.
func TestDoTxStaleExecutorRollsBack(t *testing.T) {
	for _, check := range []bool{true, false} {
		name := map[bool]string{true: "FenceChecked", false: "ControlWithoutFenceCheck"}[check]
		t.Run(name, func(t *testing.T) {
			table, admin := chargesTable(t)
			sa, ga := txGuard(t, table, dlock.WithTTL(300*time.Millisecond))
			if !check {
				mysqlstore.WithoutFenceCheck(sa)
			}
			sb, gb := txGuard(t, table, dlock.WithWait(20*time.Second))
			charged, resume := make(chan struct{}), make(chan struct{})
			var errA error
			var wg sync.WaitGroup
			wg.Go(func() {
				_, errA = myguard.DoTx(ctxT(t), sa, ga, "order-2", "fp", func(ctx context.Context, tx *sql.Tx, e dlock.Execution) ([]byte, error) {
					err := insertCharge(ctx, tx, table, "order-2", e.Fence)
					close(charged)
					<-resume // stalled past the lease
					return []byte("A"), err
				})
			})
			<-charged
			rb, errB := myguard.DoTx(ctxT(t), sb, gb, "order-2", "fp", func(ctx context.Context, tx *sql.Tx, e dlock.Execution) ([]byte, error) {
				if !e.TookOver {
					return nil, errors.New("B ran without taking over")
				}
				return []byte("B"), insertCharge(ctx, tx, table, "order-2", e.Fence)
			})
			close(resume)
			wg.Wait()
			if errB != nil || string(rb.Value) != "B" {
				t.Fatalf("the takeover: %q, %v", rb.Value, errB)
			}
			n := charges(t, admin, table, "order-2")
			t.Logf("A: %v; business rows %d", errA, n)
			if !check {
				if n != 2 {
					t.Fatalf("control: %d business rows, want 2 (the stale executor's commit doubles the charge)", n)
				}
				return
			}
			if !errors.Is(errA, dlock.ErrLost) || !errors.Is(errA, driver.ErrStaleFence) {
				t.Fatalf("the stale executor's DoTx = %v, want ErrLost and ErrStaleFence", errA)
			}
			if n != 1 {
				t.Fatalf("%d business rows, want 1 (the stale executor's charge rolled back)", n)
			}
			if r, err := myguard.DoTx(ctxT(t), sb, gb, "order-2", "fp", func(context.Context, *sql.Tx, dlock.Execution) ([]byte, error) {
				return nil, errors.New("ran again")
			}); err != nil || !r.Replayed || string(r.Value) != "B" {
				t.Fatalf("replay = %+v, %v; want B's result replayed", r, err)
			}
		})
	}
}
