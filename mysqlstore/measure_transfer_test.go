package mysqlstore_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"example.com/dlock/mysqlstore"
)

// TestMeasureTransferStatement times the forms a Transfer statement can
// take, on one key, one goroutine, a chain of hand-overs per form, the
// forms alternating in blocks of 50 for 30 s: the INSERT ... ON DUPLICATE
// KEY UPDATE ... RETURNING of the store's other statements (the first
// version of Transfer), the UPDATE whose OK packet carries the fence
// (Store.Transfer), the same UPDATE with a per-key fence + 1 instead of
// the sequence, and SELECT 1 (a round trip alone). It asserts only that
// every transfer applied; the means are the output (docs/mysql.md). Run
// with DLOCK_MEASURE=1.
func TestMeasureTransferStatement(t *testing.T) {
	if os.Getenv("DLOCK_MEASURE") == "" {
		t.Skip("set DLOCK_MEASURE=1 to measure")
	}
	_, opts := migrated(t, mysqlstore.Options{})
	db := openDB(t, shared(t).DSN("interpolateParams=true"))
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	L, F, now := opts.Table+"_locks", opts.Table+"_fence", "UTC_TIMESTAMP(6)"
	if _, err := s.Acquire(ctxT(t), "hot", "t0", time.Hour); err != nil {
		t.Fatal(err)
	}
	// One context for every form (ctxT per call would add its own cost).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cur, n := "t0", 0
	next := func() string { n++; return fmt.Sprint("t", n) }
	held := "owner = ? AND holds = 1 AND expires_at > " + now
	odku := "INSERT INTO " + L + " (name, owner, holds, fence, expires_at) VALUES (?, ?, 0, 0, '1970-01-01')" +
		" ON DUPLICATE KEY UPDATE fence = IF(" + held + ", NEXTVAL(" + F + "), fence)," +
		" expires_at = IF(" + held + ", " + now + " + INTERVAL ? MICROSECOND, expires_at)," +
		" owner = IF(" + held + ", ?, owner) RETURNING owner, holds, fence, TIMESTAMPDIFF(MICROSECOND, " + now + ", expires_at)"
	plus1 := "UPDATE " + L + " SET fence = LAST_INSERT_ID(fence + 1), expires_at = " + now + " + INTERVAL ? MICROSECOND, owner = ?" +
		" WHERE name = ? AND " + held
	forms := map[string]func() error{
		"INSERT ... ODKU ... RETURNING": func() error {
			to := next()
			var owner []byte
			var holds, us int64
			var fence uint64
			err := db.QueryRowContext(ctx, odku, []byte("hot"), make([]byte, 32), sum(cur), sum(cur), time.Hour.Microseconds(), sum(cur), sum(to)).Scan(&owner, &holds, &fence, &us)
			if err == nil && string(owner) != string(sum(to)) {
				err = fmt.Errorf("not applied")
			}
			cur = to
			return err
		},
		"UPDATE, fence in the OK packet": func() error {
			to := next()
			_, err := s.Transfer(ctx, "hot", cur, to, time.Hour)
			cur = to
			return err
		},
		"the same, fence + 1": func() error {
			to := next()
			r, err := db.ExecContext(ctx, plus1, time.Hour.Microseconds(), sum(to), []byte("hot"), sum(cur))
			cur = to
			return applied(r, err)
		},
		"SELECT 1": func() error { var x int; return db.QueryRowContext(ctx, "SELECT 1").Scan(&x) },
	}
	names := []string{"INSERT ... ODKU ... RETURNING", "UPDATE, fence in the OK packet", "the same, fence + 1", "SELECT 1"}
	tot, cnt := map[string]time.Duration{}, map[string]int{}
	for b, end := 0, time.Now().Add(30*time.Second); time.Now().Before(end); b++ {
		for i := range names {
			nm := names[(i+b)%len(names)]
			start := time.Now()
			for range 50 {
				if err := forms[nm](); err != nil {
					t.Fatalf("%s: %v", nm, err)
				}
			}
			tot[nm] += time.Since(start)
			cnt[nm] += 50
		}
	}
	for _, nm := range names {
		t.Logf("%-32s %6d runs, mean %v", nm, cnt[nm], tot[nm]/time.Duration(cnt[nm]))
	}
}

func sum(token string) []byte { d := sha256.Sum256([]byte(token)); return d[:] }

func applied(r sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, _ := r.RowsAffected(); n != 1 {
		return fmt.Errorf("%d rows affected, want 1", n)
	}
	return nil
}
