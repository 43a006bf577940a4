package mysqlstore_test

import (
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/mysqlstore"
)

// Holdings that end without a confirmed release are given back by the
// Client in the background (issue 23, "Locks that stay held after they
// were given back"). On the session lock (GET_LOCK) a key lives as long as
// its pinned connection, which the store keeps while the Client holds
// anything: a key nobody gives back stays held until the store is closed.
// On the lease table it stays held until its TTL ends: the tests give it
// 30 s and want it free far sooner. Each test has another Client, on a
// pool and store of its own (as another process), take the key within the
// bound it states. Negative control: the same tests on the code before the
// background give-back (835c212) fail, the key still held at the end of
// the watch (faulttest.GiveBackWatch).

// giveBackCheck is the session lock's CheckEvery (its session TTL) in
// these tests: short, so that a nested fixed lease runs out quickly.
const giveBackCheck = time.Second

// giveBackLeaseTTL is the lease of the lease-table tests: far longer than
// the give-back bound, so a key freed within the bound was given back.
const giveBackLeaseTTL = 30 * time.Second

// giveBackClients returns two Clients on one fresh table prefix, each on a
// pool and store of its own: session locks if session, else lease tables.
func giveBackClients(t *testing.T, session bool) (holder, other *dlock.Client) {
	t.Helper()
	_, opts := migrated(t, mysqlstore.Options{})
	var cs [2]*dlock.Client
	for i := range cs {
		db := openDB(t, shared(t).DSN())
		var m driver.Mutex
		var err error
		if session {
			var s *mysqlstore.Session
			s, err = mysqlstore.NewSession(db, mysqlstore.SessionOptions{Table: opts.Table, CheckEvery: giveBackCheck})
			if err == nil {
				t.Cleanup(func() { _ = s.Close() })
			}
			m = s
		} else {
			var s *mysqlstore.Store
			s, err = mysqlstore.New(db, opts)
			if err == nil {
				t.Cleanup(func() { _ = s.Close() })
			}
			m = s
		}
		if err != nil {
			t.Fatal(err)
		}
		if cs[i], err = dlock.New(m); err != nil {
			t.Fatal(err)
		}
		faulttest.CloseOnCleanup(t, cs[i])
	}
	return cs[0], cs[1]
}

// TestReleaseWithEndedContextGivesKeyBack: Lease.Release with a context
// that already ended returns ErrUnavailable with the context's error, and
// the key is free for another client within faulttest.GiveBackBound: on
// the session lock, and on the lease table with a 30 s fixed lease.
func TestReleaseWithEndedContextGivesKeyBack(t *testing.T) {
	t.Run("session", func(t *testing.T) {
		holder, other := giveBackClients(t, true)
		faulttest.ReleaseEnded(t, ctxT(t), holder, other, "k", faulttest.GiveBackBound)
	})
	t.Run("lease", func(t *testing.T) {
		holder, other := giveBackClients(t, false)
		faulttest.ReleaseEnded(t, ctxT(t), holder, other, "k", faulttest.GiveBackBound, dlock.WithTTL(giveBackLeaseTTL))
	})
}

// TestNestedFixedLeaseRunOutGivesKeyBack (session lock): Do(k){ Do(k,
// WithTTL(T)){ work T+0.5s } } with T the session TTL: the nested lease
// runs out under the outer one, both return, and the key must be free for
// another client within faulttest.GiveBackBound. Control: the same fixed
// lease, not nested, is given back within the same bound.
func TestNestedFixedLeaseRunOutGivesKeyBack(t *testing.T) {
	for _, tc := range faulttest.RunOuts {
		t.Run(tc.Name, func(t *testing.T) {
			holder, other := giveBackClients(t, true)
			tc.Run(t, ctxT(t), holder, other, "k", giveBackCheck, faulttest.GiveBackBound)
		})
	}
}

// TestCloseWaitsForGiveBack: Close right after a Release with an ended
// context waits for the background give-back: once Close returned,
// another client's first TryLock takes the key (the holder's store still
// open: closing it would free a session lock for the wrong reason), on the
// session lock and on the lease table with a 30 s lease.
func TestCloseWaitsForGiveBack(t *testing.T) {
	t.Run("session", func(t *testing.T) {
		holder, other := giveBackClients(t, true)
		faulttest.ReleaseEndedThenClose(t, ctxT(t), holder, other, "k")
	})
	t.Run("lease", func(t *testing.T) {
		holder, other := giveBackClients(t, false)
		faulttest.ReleaseEndedThenClose(t, ctxT(t), holder, other, "k", dlock.WithTTL(giveBackLeaseTTL))
	})
}

// TestLeaseLostLocallyGivesKeyBack (faulttest.LateExtend, lease table): a
// fixed 2 s lease whose Extend to 30 s is applied but answered too late
// (the holder's pool goes through a fault proxy) is lost on the local
// clock while the table holds the key for 30 s more; the Client must give
// the key back (token-checked): another client takes it within
// faulttest.GiveBackBound of the loss. On 835c212 a lease lost on the
// local clock was given back on session stores only.
func TestLeaseLostLocallyGivesKeyBack(t *testing.T) {
	db, opts := migrated(t, mysqlstore.Options{})
	p := proxy(t, shared(t).Addr())
	// interpolateParams: each statement is one round trip (no
	// server-side prepare whose late reply would keep the Extend unsent).
	hs, err := mysqlstore.New(openDB(t, mysqlserver.DSNFor(p.Addr(), mysqlserver.Database, "interpolateParams=true")), opts)
	if err != nil {
		t.Fatal(err)
	}
	ostore, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	holder, err1 := dlock.New(hs)
	other, err2 := dlock.New(ostore)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	faulttest.CloseOnCleanup(t, holder)
	faulttest.CloseOnCleanup(t, other)
	faulttest.LateExtend(t, ctxT(t), holder, other, p, "k", 2*time.Second, faulttest.GiveBackBound)
}
