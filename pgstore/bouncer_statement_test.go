package pgstore_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/pgbouncer"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// bouncedDB returns a *sql.DB (pgx's stdlib driver) through b, set as
// docs/postgres.md says for a pooler (default_query_exec_mode=exec),
// closed when the test ends.
func bouncedDB(t *testing.T, b *pgbouncer.Bouncer) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", b.URL()+"&default_query_exec_mode=exec")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestBouncerStatementRowLock: through PgBouncer in statement mode, which
// refuses every transaction block, WithRowLock and WithRowLockDB fail at
// once (well under 5 s, three calls each) with an error matching
// ErrStatementPooling and dlock.ErrRefused, and fn never runs. Without the
// classification (rowErr → classify) the error was PgBouncer's raw FATAL
// 08P01, matching no sentinel (an unknown outcome). The row lock through
// transaction and session pooling: TestBouncerRowLock.
func TestBouncerStatementRowLock(t *testing.T) {
	b := bouncer(t, pgbouncer.Statement)
	pool, db := bouncedPool(t, b, 4), bouncedDB(t, b)
	sessMigrate(t, pool)
	ran := 0
	calls := map[string]func() error{
		"WithRowLock": func() error {
			return pgstore.WithRowLock(ctx(t), pool, "stmt-k", pgstore.RowLockOptions{}, func(pgx.Tx) error { ran++; return nil })
		},
		"WithRowLockDB": func() error {
			return pgstore.WithRowLockDB(ctx(t), db, "stmt-k", pgstore.RowLockOptions{}, func(*sql.Tx) error { ran++; return nil })
		},
	}
	for name, call := range calls {
		for i := range 3 {
			start := time.Now()
			err := call()
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s %d took %v; want an answer at once", name, i, d)
			}
			if !errors.Is(err, pgstore.ErrStatementPooling) || !errors.Is(err, dlock.ErrRefused) {
				t.Fatalf("%s %d through statement pooling = %v; want ErrStatementPooling (ErrRefused)", name, i, err)
			}
			if i == 0 {
				t.Logf("%s: %v", name, err)
			}
		}
	}
	if ran != 0 {
		t.Fatalf("fn ran %d times through statement pooling; want never", ran)
	}
}

// TestBouncerStatementSessionLock: session locks through PgBouncer in
// statement mode are refused: ten fresh stores, each Lock fails with an
// error matching ErrSharedSession, ErrStatementPooling and
// dlock.ErrRefused. The store's first-use check sees its BEGIN refused.
// Without that (the check took the refusal for "cannot check") both of two
// stores got the same key: the second store's check ran its BEGIN on the
// server connection holding the first store's lock, and PgBouncer closed
// that connection, freeing the lock, with no word to its holder.
func TestBouncerStatementSessionLock(t *testing.T) {
	b := bouncer(t, pgbouncer.Statement)
	sessMigrate(t, bouncedPool(t, b, 2))
	for i := range 10 {
		_, err := bouncedSession(t, b, 2).Lock(ctx(t), "hot")
		if !errors.Is(err, pgstore.ErrSharedSession) || !errors.Is(err, pgstore.ErrStatementPooling) || !errors.Is(err, dlock.ErrRefused) {
			t.Fatalf("store %d: Lock through statement pooling = %v; want ErrSharedSession and ErrStatementPooling (ErrRefused)", i, err)
		}
		if i == 0 {
			t.Logf("Lock: %v", err)
		}
	}
}

// TestBouncerLeaseTableDB: the lease table on a *sql.DB (NewDB, pgx's
// stdlib driver, default_query_exec_mode=exec) through PgBouncer in
// statement and session mode, migrated through it (MigrateDB: one
// multi-statement simple query, one implicit transaction, which statement
// pooling allows): every operation answers as on a direct connection
// (leaseOperations).
func TestBouncerLeaseTableDB(t *testing.T) {
	for _, mode := range []pgbouncer.Mode{pgbouncer.Statement, pgbouncer.Session} {
		t.Run(string(mode), func(t *testing.T) {
			db := bouncedDB(t, bouncer(t, mode))
			table := "t" + tok()[:8] // a fresh prefix, created through the bouncer
			if err := pgstore.MigrateDB(ctx(t), db, pgstore.Options{Table: table}); err != nil {
				t.Fatalf("MigrateDB through %s pooling: %v", mode, err)
			}
			s, err := pgstore.NewDB(db, pgstore.Options{Table: table})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeStore(s) })
			leaseOperations(t, s)
		})
	}
}
