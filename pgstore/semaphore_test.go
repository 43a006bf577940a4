package pgstore_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/sqltest"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tests of the permits table; the Semaphore's rules themselves are checked
// by the conformance suite (TestConformance/Semaphore/...).

// permitsFunction returns the DDL of table's acquisition function, changed
// by edit.
func permitsFunction(t *testing.T, table string, edit func(string) string) string {
	t.Helper()
	ddl := pgstore.Schema(pgstore.Options{Table: table})
	i := strings.Index(ddl, "CREATE OR REPLACE FUNCTION")
	j := strings.LastIndex(ddl, "$fn$;")
	if i < 0 || j < i {
		t.Fatalf("no acquisition function in the schema:\n%s", ddl)
	}
	return edit(ddl[i : j+len("$fn$;")])
}

var (
	keyLockLine = regexp.MustCompile(`(?m)^\s*PERFORM pg_advisory_xact_lock\(.*\n`)
	countLine   = regexp.MustCompile(`(?m)^(\s*IF o_used > 0 AND o_lim <> p_n THEN)`)
)

// TestPermitsKeyLockSerializesAcquirers: 8 acquirers on 4 pools race for a
// key of 2 permits, with the function widened by a 20 ms pause between
// its count and its insert. The key's advisory lock admits exactly 2 in
// every round. Control: the same function without the lock admits more
// (both count before either inserts), so the race is real and the count
// would see it.
func TestPermitsKeyLockSerializesAcquirers(t *testing.T) {
	for _, c := range []struct {
		name string
		lock bool
	}{{"WithKeyLock", true}, {"ControlWithoutKeyLock", false}} {
		t.Run(c.name, func(t *testing.T) {
			admin := newPool(t)
			table := uniqTable(t, admin)
			fn := permitsFunction(t, table, func(f string) string {
				f = countLine.ReplaceAllString(f, "    PERFORM pg_sleep(0.02);\n$1")
				if !c.lock {
					f = keyLockLine.ReplaceAllString(f, "")
				}
				return f
			})
			if _, err := admin.Exec(ctx(t), fn); err != nil {
				t.Fatalf("replace the function: %v", err)
			}
			var stores []*pgstore.Store
			for range 4 {
				p := newPool(t)
				if err := p.Ping(ctx(t)); err != nil {
					t.Fatal(err)
				}
				stores = append(stores, newStore(t, p, pgstore.Options{Table: table}))
			}
			most := 0
			for round := range 3 {
				most = max(most, sqltest.PermitsRaceRound(t, stores, "k"+string(rune('a'+round))))
			}
			switch {
			case c.lock && most != 2:
				t.Fatalf("at most %d of 8 acquirers admitted to a key of 2 permits, want exactly 2", most)
			case !c.lock && most <= 2:
				t.Fatalf("control: without the key lock at most %d acquirers were admitted; want more than 2 (the race did not happen)", most)
			}
			t.Logf("at most %d admitted to a key of 2 permits", most)
		})
	}
}

// TestPermitsFencesFollowTheLockSequence: permits and locks of one table
// draw their fences from one sequence, so each new holding's fence, of
// either kind, is above every earlier one.
func TestPermitsFencesFollowTheLockSequence(t *testing.T) {
	sqltest.FencesFollowTheLockSequence(t, newStore(t, newPool(t), pgstore.Options{}))
}

// TestPermitsRefuseRepeatableRead: the acquisition function counts with a
// fresh snapshot per statement, which only READ COMMITTED gives; a
// connection whose transactions default to REPEATABLE READ is refused
// (driver.ErrRefused) and takes nothing.
func TestPermitsRefuseRepeatableRead(t *testing.T) {
	admin := newPool(t)
	table := uniqTable(t, admin)
	cfg, err := pgxpool.ParseConfig(server(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	rr, err := pgxpool.NewWithConfig(ctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rr.Close)
	s := newStore(t, rr, pgstore.Options{Table: table})
	if _, err := s.AcquirePermits(ctx(t), "k", tok(), 1, 1, time.Minute); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("AcquirePermits under REPEATABLE READ: %v, want ErrRefused", err)
	}
	var n int
	if err := admin.QueryRow(ctx(t), "SELECT count(*) FROM "+table+"_permits").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d holdings after the refusal (%v), want 0", n, err)
	}
	ok := newStore(t, newPool(t), pgstore.Options{Table: table}) // control: READ COMMITTED
	if _, err := ok.AcquirePermits(ctx(t), "k", tok(), 1, 1, time.Minute); err != nil {
		t.Fatalf("AcquirePermits under READ COMMITTED: %v", err)
	}
}

// TestSemaphoreUserAPI: the user API (dlock.Semaphores) on the permits
// table, two "processes" (each a pool, a store and a Semaphores): a waiter
// with an hour's backoff, behind a holder whose renewed lease has 30 s to
// run, gets in within seconds of the release, so it was woken by
// LISTEN/NOTIFY, not by pacing; a limit that is not the key's is
// ErrInvalid with the store's LimitMismatchError, at once.
func TestSemaphoreUserAPI(t *testing.T) {
	table := uniqTable(t, newPool(t))
	newSems := func() *dlock.Semaphores {
		s, err := dlock.NewSemaphores(newStore(t, newPool(t), pgstore.Options{Table: table}), dlock.WithBackoff(func(int) time.Duration { return time.Hour }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		return s
	}
	// The waiter's first failed attempt subscribes; the second one's pause
	// sleeps on the subscription.
	sqltest.SemaphoreUserAPI(t, newSems(), newSems(), "the waiter woken by the release")
}

// TestPermitsAfterClose: after Close the Semaphore's calls fail with
// ErrInvalid before any I/O, as the mutex's do, and the holding is left to
// its lease (a second store still sees it). Control: before Close they work.
func TestPermitsAfterClose(t *testing.T) {
	pool := newPool(t)
	table := uniqTable(t, pool)
	s := newStore(t, pool, pgstore.Options{Table: table})
	a := tok()
	if _, err := s.AcquirePermits(ctx(t), "k", a, 1, 1, time.Minute); err != nil {
		t.Fatalf("before Close: %v", err)
	}
	if err := s.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquirePermits(ctx(t), "k2", tok(), 1, 1, time.Minute); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("AcquirePermits after Close: %v, want ErrInvalid", err)
	}
	if err := s.ReleasePermits(ctx(t), "k", a); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("ReleasePermits after Close: %v, want ErrInvalid", err)
	}
	other := newStore(t, pool, pgstore.Options{Table: table})
	if _, err := other.AcquirePermits(ctx(t), "k", tok(), 1, 1, time.Minute); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("the closed store's holding: %v, want it still held (ErrNotAcquired)", err)
	}
}

// TestPermitsExtensionInFlightIsCounted: a holding whose lease has just
// ended on the server clock while an ExtendPermits of it is in flight (an
// open transaction that extended it, with a now() before the expiry, holds
// its row) is not taken for expired: the acquisition's DELETE of expired
// holdings waits for the row, re-checks the expiry on the extended row and
// keeps it, so a newcomer to the key's one permit is refused. Control: a
// function that skips expired rows in its count instead of deleting them
// reads the old row without waiting, admits the newcomer, and the
// extension then commits: two holdings of one permit.
func TestPermitsExtensionInFlightIsCounted(t *testing.T) {
	for _, c := range []struct {
		name   string
		delete bool
	}{{"DeleteExpired", true}, {"ControlSkipExpired", false}} {
		t.Run(c.name, func(t *testing.T) {
			admin := newPool(t)
			table := uniqTable(t, admin)
			if !c.delete {
				fn := permitsFunction(t, table, func(f string) string {
					f = regexp.MustCompile(`(?m)^\s*DELETE FROM .*\n`).ReplaceAllString(f, "")
					return strings.ReplaceAll(f, "WHERE p.name = p_name;", "WHERE p.name = p_name AND p.expires_at > now();")
				})
				if _, err := admin.Exec(ctx(t), fn); err != nil {
					t.Fatalf("replace the function: %v", err)
				}
			}
			s := newStore(t, newPool(t), pgstore.Options{Table: table})
			if _, err := s.AcquirePermits(ctx(t), "k", tok(), 1, 1, 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			tx, err := admin.Begin(ctx(t)) // the extension in flight
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.Background())
			if _, err := tx.Exec(ctx(t), "UPDATE "+table+"_permits SET expires_at = now() + interval '1 minute' WHERE name = 'k' AND expires_at > now()"); err != nil {
				t.Fatal(err)
			}
			waitServer(t, admin, "SELECT now() > (SELECT expires_at FROM "+table+"_permits WHERE name = 'k')", "the holding's old expiry")
			done := make(chan error, 1)
			go func() {
				_, err := s.AcquirePermits(ctx(t), "k", tok(), 1, 1, time.Minute)
				done <- err
			}()
			var (
				got      error
				returned bool
			)
			blocked := func() bool {
				select {
				case got = <-done:
					returned = true
					return true
				default:
				}
				var n int
				err := admin.QueryRow(ctx(t), "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%_permits_acquire(%'").Scan(&n)
				return err == nil && n > 0
			}
			if !testkit.Eventually(10*time.Second, blocked) {
				t.Fatal("the acquisition neither returned nor waited for the row lock within 10s")
			}
			if err := tx.Commit(ctx(t)); err != nil {
				t.Fatal(err)
			}
			if !returned {
				got = <-done
			}
			switch {
			case c.delete && !errors.Is(got, driver.ErrNotAcquired):
				t.Fatalf("the newcomer: %v; want refused (ErrNotAcquired): the extended holding still has the permit", got)
			case !c.delete && got != nil:
				t.Fatalf("control: the newcomer: %v; want admitted (the over-admission the deletion prevents)", got)
			}
			t.Logf("the newcomer: %v", got)
		})
	}
}

// waitServer polls the boolean query q until it is true, within 10 s.
func waitServer(t *testing.T, pool *pgxpool.Pool, q, what string) {
	t.Helper()
	if !testkit.Eventually(10*time.Second, func() bool {
		var ok bool
		return pool.QueryRow(ctx(t), q).Scan(&ok) == nil && ok
	}) {
		t.Fatalf("%s: not true within 10s", what)
	}
}
