package pgstore_test

import (
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/pgstore"
)

// Holdings that end without a confirmed release are given back by the
// Client in the background (issue 23, "Locks that stay held after they
// were given back"). On the session lock a key lives as long as its pinned
// connection, which the store keeps while the Client holds anything: a key
// nobody gives back stays held until the store is closed. On the lease
// table it stays held until its TTL ends: the tests give it 30 s and want
// it free far sooner. Each test has another Client, on a pool and store of
// its own (as another process), take the key within the bound it states.
// Negative control: the same tests on the code before the background
// give-back (835c212) fail, the key still held at the end of the watch
// (faulttest.GiveBackWatch).

// giveBackCheck is the session lock's check interval (its session TTL) in
// these tests: short, so that a nested fixed lease runs out quickly.
const giveBackCheck = time.Second

// giveBackLeaseTTL is the lease of the lease-table tests: far longer than
// the give-back bound, so a key freed within the bound was given back.
const giveBackLeaseTTL = 30 * time.Second

// giveBackClients returns two Clients on one fresh schema prefix, each on
// a pool and store of its own: session stores if session, else lease
// stores.
func giveBackClients(t *testing.T, session bool) (holder, other *dlock.Client) {
	t.Helper()
	table := uniqTable(t, newPool(t))
	var cs [2]*dlock.Client
	for i := range cs {
		var m driver.Mutex
		if session {
			m = newSession(t, newPool(t), pgstore.SessionOptions{Table: table, CheckInterval: giveBackCheck})
		} else {
			m = newStore(t, newPool(t), pgstore.Options{Table: table})
		}
		dc, err := dlock.New(m)
		if err != nil {
			t.Fatal(err)
		}
		faulttest.CloseOnCleanup(t, dc)
		cs[i] = dc
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
		faulttest.ReleaseEnded(t, ctx(t), holder, other, "k", faulttest.GiveBackBound)
	})
	t.Run("lease", func(t *testing.T) {
		holder, other := giveBackClients(t, false)
		faulttest.ReleaseEnded(t, ctx(t), holder, other, "k", faulttest.GiveBackBound, dlock.WithTTL(giveBackLeaseTTL))
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
			tc.Run(t, ctx(t), holder, other, "k", giveBackCheck, faulttest.GiveBackBound)
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
		faulttest.ReleaseEndedThenClose(t, ctx(t), holder, other, "k")
	})
	t.Run("lease", func(t *testing.T) {
		holder, other := giveBackClients(t, false)
		faulttest.ReleaseEndedThenClose(t, ctx(t), holder, other, "k", dlock.WithTTL(giveBackLeaseTTL))
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
	pool := newPool(t)
	table := uniqTable(t, pool)
	p := proxied(t, server(t).Addr())
	holder, err := dlock.New(newStore(t, newPool(t, p.Addr()), pgstore.Options{Table: table}))
	if err != nil {
		t.Fatal(err)
	}
	other, err := dlock.New(newStore(t, pool, pgstore.Options{Table: table}))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, holder)
	faulttest.CloseOnCleanup(t, other)
	faulttest.LateExtend(t, ctx(t), holder, other, p, "k", 2*time.Second, faulttest.GiveBackBound)
}
