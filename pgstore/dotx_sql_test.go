package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"example.com/dlock/pgstore/pgguard"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// TestCompleteRecordSQLTxCommitsWithTheWrites: on a store made by NewDB,
// Guard.DoTx with a database/sql transaction that charges and completes
// the record by CompleteRecordSQLTx: one row, the result replayed; and the
// same folded, Guard.DoFolded with BeginRecordSQLTx beginning the record
// in that transaction. A completion with another fence (control: an
// execution that does not own the record) is refused with ErrStaleFence,
// and its transaction's charge rolled back. pgguard.DoTx refuses a NewDB
// store with ErrInvalid.
func TestCompleteRecordSQLTxCommitsWithTheWrites(t *testing.T) {
	table := pgBackend{}.Table(t)
	admin := &pgGuard{pool: newPool(t), table: table}
	db := stdlib.OpenDBFromPool(newPool(t))
	t.Cleanup(func() { db.Close() })
	s, err := pgstore.NewDB(db, pgstore.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeStore(s) })
	g, err := dlock.NewGuard(s, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	charge := func(offset uint64) func(context.Context, dlock.Execution) ([]byte, error) {
		return func(ctx context.Context, e dlock.Execution) ([]byte, error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return nil, err
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+"_charges (key, fence) VALUES ($1, $2)", e.Key, int64(e.Fence)); err != nil {
				return nil, err
			}
			if err := s.CompleteRecordSQLTx(ctx, tx, driver.RecordID{Scope: e.Scope, Key: e.Key}, e.Fence+offset, []byte("paid")); err != nil {
				return nil, err
			}
			return []byte("paid"), tx.Commit()
		}
	}
	if _, err := g.DoTx(ctx(t), "stale", "fp", charge(1)); !errors.Is(err, driver.ErrStaleFence) || !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("a completion with another fence: %v, want ErrStaleFence and ErrLost", err)
	}
	if n := admin.Charges(t, "stale"); n != 0 {
		t.Fatalf("control: %d business rows after a refused completion, want 0 (rolled back)", n)
	}
	for range 2 {
		if r, err := g.DoTx(ctx(t), "ok", "fp", charge(0)); err != nil || string(r.Value) != "paid" {
			t.Fatalf("DoTx = %+v, %v", r, err)
		}
	}
	if n := admin.Charges(t, "ok"); n != 1 {
		t.Fatalf("%d business rows after a call and its replay, want 1", n)
	}
	var tx *sql.Tx // the folded begin's
	begin := func(bctx context.Context, id driver.RecordID, token, fp string, lease, keep time.Duration) (driver.RecordBegin, error) {
		var err error
		if tx, err = db.BeginTx(ctx(t), nil); err != nil {
			return driver.RecordBegin{}, err
		}
		b, err := s.BeginRecordSQLTx(bctx, tx, id, token, fp, lease, keep)
		if err != nil || b.State != driver.RecordStarted {
			_ = tx.Rollback()
		}
		return b, err
	}
	for range 2 {
		r, err := g.DoFolded(ctx(t), "folded", "fp", begin, func(ctx context.Context, e dlock.Execution) ([]byte, error) {
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+"_charges (key, fence) VALUES ($1, $2)", e.Key, int64(e.Fence)); err != nil {
				return nil, err
			}
			if err := s.CompleteRecordSQLTx(ctx, tx, driver.RecordID{Scope: e.Scope, Key: e.Key}, e.Fence, []byte("folded")); err != nil {
				return nil, err
			}
			return []byte("folded"), tx.Commit()
		})
		if err != nil || string(r.Value) != "folded" {
			t.Fatalf("DoFolded = %+v, %v", r, err)
		}
	}
	if n := admin.Charges(t, "folded"); n != 1 {
		t.Fatalf("%d business rows after a folded call and its replay, want 1", n)
	}
	_, err = pgguard.DoTx(ctx(t), s, g, "k", "fp", func(context.Context, pgx.Tx, dlock.Execution) ([]byte, error) { return nil, nil })
	if !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("Store.DoTx on a NewDB store = %v, want ErrInvalid", err)
	}
}
