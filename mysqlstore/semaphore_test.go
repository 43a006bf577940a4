package mysqlstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/sqltest"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/mysqlstore"
)

// Tests of the permits table; the Semaphore's rules themselves are checked
// by the conformance suite (TestConformanceLease/Semaphore/...).

// permitStores returns count stores on one fresh prefix, each on a pool of
// its own (interpolateParams=true, as the URL opener sets), with edit
// applied to each; permitStoresOn also returns the prefix's permits table.
func permitStores(t *testing.T, count int, edit func(*mysqlstore.Store)) []*mysqlstore.Store {
	stores, _ := permitStoresOn(t, count, edit)
	return stores
}

func permitStoresOn(t *testing.T, count int, edit func(*mysqlstore.Store)) ([]*mysqlstore.Store, string) {
	t.Helper()
	_, opts := migrated(t, mysqlstore.Options{})
	var stores []*mysqlstore.Store
	for range count {
		s, err := mysqlstore.New(openDB(t, mysqlserver.DSNFor(shared(t).Addr(), mysqlserver.Database, "interpolateParams=true")), opts)
		if err != nil {
			t.Fatal(err)
		}
		edit(s)
		stores = append(stores, s)
	}
	return stores, opts.Table + "_permits"
}

// TestPermitsAnchorSerializesAcquirers: 8 acquirers on 4 pools race for a
// key of 2 permits, each pausing 20 ms between its read of the holdings and
// its insert. The lock on the key's anchor row admits exactly 2 in every
// round, and no deadlock. Control: without the anchor's lock more are
// admitted (each counts before the others insert), so the race is real and
// the count would see it.
func TestPermitsAnchorSerializesAcquirers(t *testing.T) {
	for _, c := range []struct {
		name   string
		anchor bool
	}{{"WithAnchor", true}, {"ControlWithoutAnchor", false}} {
		t.Run(c.name, func(t *testing.T) {
			stores := permitStores(t, 4, func(s *mysqlstore.Store) { mysqlstore.WithPermitsRace(s, c.anchor) })
			most := 0
			for round := range 3 {
				most = max(most, sqltest.PermitsRaceRound(t, stores, "k"+string(rune('a'+round))))
			}
			switch {
			case c.anchor && most != 2:
				t.Fatalf("at most %d of 8 acquirers admitted to a key of 2 permits, want exactly 2", most)
			case !c.anchor && most <= 2:
				t.Fatalf("control: without the anchor at most %d acquirers were admitted; want more than 2 (the race did not happen)", most)
			}
			var deadlocks int64
			for _, s := range stores {
				deadlocks += s.Deadlocks()
			}
			if deadlocks != 0 {
				t.Errorf("%d deadlocks (retried), want 0", deadlocks)
			}
			t.Logf("at most %d admitted to a key of 2 permits", most)
		})
	}
}

// TestPermitsFencesFollowTheLockSequence: permits and locks of one prefix
// draw their fences from one sequence, so each new holding's fence, of
// either kind, is above every earlier one.
func TestPermitsFencesFollowTheLockSequence(t *testing.T) {
	sqltest.FencesFollowTheLockSequence(t, newStore(t, mysqlstore.Options{}))
}

// TestSemaphoreUserAPI: the user API (dlock.Semaphores) on the permits
// table, two "processes" (each a pool, a store and a Semaphores). MariaDB
// has no PermitNotifier, so a waiter paces (backoff 50 ms): behind a holder
// whose renewed lease has 30 s to run, it gets in within seconds of the
// release, by pacing, not at the lease's end. A limit that is not the
// key's is ErrInvalid with the store's LimitMismatchError, at once.
func TestSemaphoreUserAPI(t *testing.T) {
	stores := permitStores(t, 2, func(*mysqlstore.Store) {})
	newSems := func(s *mysqlstore.Store) *dlock.Semaphores {
		sems, err := dlock.NewSemaphores(s, dlock.WithBackoff(func(int) time.Duration { return 50 * time.Millisecond }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sems.Close(context.Background()) })
		return sems
	}
	sqltest.SemaphoreUserAPI(t, newSems(stores[0]), newSems(stores[1]), "the paced waiter's acquisition after the release")
}

// TestPermitsAfterClose: after Close AcquirePermits fails with ErrInvalid
// before any I/O, as Acquire does, while ExtendPermits and ReleasePermits
// still work, so a holder can end its holding. Control: before Close
// AcquirePermits works.
func TestPermitsAfterClose(t *testing.T) {
	s := permitStores(t, 1, func(*mysqlstore.Store) {})[0]
	if _, err := s.AcquirePermits(ctxT(t), "k", "a", 1, 1, time.Minute); err != nil {
		t.Fatalf("before Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquirePermits(ctxT(t), "k2", "b", 1, 1, time.Minute); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("AcquirePermits after Close: %v, want ErrInvalid", err)
	}
	if _, err := s.ExtendPermits(ctxT(t), "k", "a", time.Minute); err != nil {
		t.Fatalf("ExtendPermits after Close: %v", err)
	}
	if err := s.ReleasePermits(ctxT(t), "k", "a"); err != nil {
		t.Fatalf("ReleasePermits after Close: %v", err)
	}
}

// TestPermitsExtensionInFlightIsCounted: a holding whose lease has just
// ended on the server clock while an extension of it is in flight (an open
// transaction that extended it before the expiry holds its row) is not
// taken for expired: the acquisition's DELETE of the expired holdings it
// read waits for the row, re-checks the expiry on the extended row and
// keeps it, and the read after it counts the holding, so a newcomer to the
// key's one permit is refused. Control (WithoutPrune): an acquisition that
// skips expired rows in its count reads the old row without waiting,
// admits the newcomer, and the extension then commits: two holdings of one
// permit.
func TestPermitsExtensionInFlightIsCounted(t *testing.T) {
	for _, c := range []struct {
		name  string
		prune bool
	}{{"DeleteExpired", true}, {"ControlSkipExpired", false}} {
		t.Run(c.name, func(t *testing.T) {
			stores, table := permitStoresOn(t, 1, func(s *mysqlstore.Store) {
				if !c.prune {
					mysqlstore.WithoutPrune(s)
				}
			})
			s := stores[0]
			admin := openDB(t, shared(t).DSN())
			if _, err := s.AcquirePermits(ctxT(t), "k", "holder", 1, 1, 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			tx, err := admin.BeginTx(ctxT(t), nil) // the extension in flight
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.Exec("UPDATE " + table + " SET expires_at = UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE WHERE name = 'k' AND expires_at > UTC_TIMESTAMP(6)"); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, 10*time.Second, "the holding's old expiry", func() bool {
				var ok bool
				return admin.QueryRow("SELECT UTC_TIMESTAMP(6) > (SELECT expires_at FROM "+table+" WHERE name = 'k')").Scan(&ok) == nil && ok
			})
			done := make(chan error, 1)
			go func() {
				_, err := s.AcquirePermits(ctxT(t), "k", "newcomer", 1, 1, time.Minute)
				done <- err
			}()
			var (
				got      error
				returned bool
			)
			testkit.WaitFor(t, 10*time.Second, "the acquisition returning or waiting for the row lock", func() bool {
				select {
				case got = <-done:
					returned = true
					return true
				default:
				}
				// A statement of the acquisition on the permits table running
				// for 50 ms: waiting for the row (INNODB_TRX counted no LOCK
				// WAIT here, on 10.11).
				var n int
				err := admin.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND IN ('Query', 'Execute')" +
					" AND INFO LIKE '% " + table + " %' AND TIME_MS >= 50").Scan(&n)
				return err == nil && n > 0
			})
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if !returned {
				got = <-done
			}
			switch {
			case c.prune && !errors.Is(got, driver.ErrNotAcquired):
				t.Fatalf("the newcomer: %v; want refused (ErrNotAcquired): the extended holding still has the permit", got)
			case !c.prune && got != nil:
				t.Fatalf("control: the newcomer: %v; want admitted (the over-admission the deletion prevents)", got)
			}
			t.Logf("the newcomer: %v", got)
		})
	}
}
