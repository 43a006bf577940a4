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

// TestBouncerStatementBeginFreesLocks is why session locks cannot be made
// to work through statement pooling, guards or not: a store with its
// first-use check off takes a key (its lock stays on the server connection
// that ran the statement, which PgBouncer then lends to anyone), and any
// other client's BEGIN through the bouncer (here a plain pgx pool's) that
// lands on that server connection makes PgBouncer close it, which frees
// the lock behind the holder's back: pg_locks, read directly, no longer has
// it, and a second store takes the key while the first still holds its
// Lease. Up to 5 tries (PgBouncer lends the server connection used last,
// so the BEGIN usually lands there); the test fails if the lock never
// vanished, so it shows the hazard the first-use check's refusal
// (TestBouncerStatementSessionLock) guards against.
func TestBouncerStatementBeginFreesLocks(t *testing.T) {
	b := bouncer(t, pgbouncer.Statement)
	sessMigrate(t, bouncedPool(t, b, 2))
	direct, other := newPool(t), bouncedPool(t, b, 2)
	id := uint64(pgstore.LockID("dlock", "hot"))
	// Which server connection the BEGIN lands on is PgBouncer's choice: 1 try
	// in 1 shows it on a quiet machine, but a loaded one (CI, every store's
	// suite at once) once went 5 tries without; 20 cost about 2 s at most.
	for try := range 20 {
		a := bouncedSession(t, b, 2, pgstore.WithoutSharedCheck)
		l, err := a.Lock(ctx(t), "hot")
		if err != nil {
			t.Fatalf("try %d: Lock with the check off: %v", try, err)
		}
		if _, err := other.Begin(ctx(t)); err == nil {
			t.Fatalf("try %d: BEGIN through statement pooling succeeded", try)
		}
		var n int
		if err := direct.QueryRow(ctx(t), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 1`,
			uint32(id>>32), uint32(id)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			c := bouncedSession(t, b, 2, pgstore.WithoutSharedCheck)
			l2, err := c.TryLock(ctx(t), "hot")
			t.Logf("try %d: after another client's BEGIN the lock is gone from pg_locks while its holder's Lease reports %v; a second store's TryLock: %v", try, l.Err(), err)
			if err != nil || l.Err() != nil {
				t.Fatalf("try %d: second store's TryLock = %v, first holder's Err = %v; want two holders", try, err, l.Err())
			}
			_ = l2.Release(ctx(t))
			return
		}
		_ = l.Release(ctx(t))
	}
	t.Fatal("in 20 tries no BEGIN through statement pooling freed a held session lock: the hazard was not shown")
}
