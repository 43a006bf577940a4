package mysqlstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/mysqlstore"
)

// questions returns the statements the session of db's one connection has
// sent (MariaDB's Questions counter, which counts what clients send, not
// what runs inside a compound statement), not counting this query.
func questions(t *testing.T, db *sql.DB) int {
	t.Helper()
	var name string
	var n int
	if err := db.QueryRow("SHOW SESSION STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// oneSessionStore returns a lease store on a fresh prefix whose pool has
// one connection with interpolateParams=true (every statement one round
// trip, counted by questions), that pool and the store's options.
// Housekeeping is off (SweepEvery of an hour, after the first call's sweep).
func oneSessionStore(t *testing.T) (*sql.DB, *mysqlstore.Store, mysqlstore.Options) {
	_, opts := migrated(t, mysqlstore.Options{SweepEvery: time.Hour})
	db := openDB(t, mysqlserver.DSNFor(shared(t).Addr(), mysqlserver.Database, "interpolateParams=true"))
	db.SetMaxOpenConns(1) // one session: the counter is its
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	return db, s, opts
}

// TestPermitRoundTrips: with interpolateParams=true every statement is one
// round trip, so the statements a session sends count them. An uncontended
// AcquirePermits + ReleasePermits is 2 (the acquisition is one compound
// statement), whether the key had expired holdings to prune or not, and a
// refused acquisition 1. Control: ExtendPermits, two statements, counts 2,
// so the counter sees each statement. Housekeeping is off (SweepEvery of an
// hour, after the first call's sweep).
func TestPermitRoundTrips(t *testing.T) {
	db, s, opts := oneSessionStore(t)
	ctx := ctxT(t)
	count := func(what string, want int, f func(ctx context.Context) error) {
		t.Helper()
		q0 := questions(t, db)
		if err := f(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := questions(t, db) - q0 - 1; got != want {
			t.Fatalf("%s: %d statements, want %d", what, got, want)
		}
	}
	cycle := func(ctx context.Context) error {
		if _, err := s.AcquirePermits(ctx, "k", "tok", 2, 1, time.Minute); err != nil {
			return err
		}
		return s.ReleasePermits(ctx, "k", "tok")
	}
	if err := cycle(ctx); err != nil { // the first call's sweep
		t.Fatal(err)
	}
	for range 3 {
		count("acquire+release", 2, cycle)
	}
	if _, err := s.AcquirePermits(ctx, "k", "short", 2, 1, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// the next acquisition prunes the expired holding in the same statement
	waitExpired(t, db, opts.Table+"_permits")
	count("acquire+release pruning an expired holding", 2, cycle)
	for _, tok := range []string{"a", "b"} {
		if _, err := s.AcquirePermits(ctx, "k", tok, 2, 1, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	count("refused acquire", 1, func(ctx context.Context) error {
		_, err := s.AcquirePermits(ctx, "k", "c", 2, 1, time.Minute)
		if err == nil {
			t.Fatal("a third permit of 2 was granted")
		}
		return nil
	})
	count("control: ExtendPermits", 2, func(ctx context.Context) error {
		_, err := s.ExtendPermits(ctx, "k", "a", time.Minute)
		return err
	})
}

// waitExpired waits until table has no live holding of under a second
// left: the 1 ms one has expired on the database clock.
func waitExpired(t *testing.T, db *sql.DB, table string) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, "the 1 ms holding's expiry", func() bool {
		var n int
		err := db.QueryRow("SELECT COUNT(*) FROM " + table + " WHERE expires_at > UTC_TIMESTAMP(6) AND expires_at < UTC_TIMESTAMP(6) + INTERVAL 1 SECOND").Scan(&n)
		return err == nil && n == 0
	})
}
