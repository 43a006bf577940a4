package etcdstore_test

import (
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/etcdstore"
	"example.com/dlock/etcdstore/internal/etcdtest"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/faulttest"
)

// Holdings that end without a confirmed release are given back by the
// Client in the background (issue 23, "Locks that stay held after they
// were given back"): an etcd session keeps its keys for as long as any
// lease of the store keeps it alive, so a key nobody gives back stays
// held. Each test has another Client, on an etcd client and session of its
// own (as another process), take the key within the bound it states.
// Negative control: the same tests on the code before the background
// give-back (835c212) fail, the key still held at the end of the watch
// (faulttest.GiveBackWatch).

// giveBackTTL is the session TTL of these tests: etcd's shortest, so that
// a nested fixed lease runs out quickly.
const giveBackTTL = etcdstore.MinSessionTTL

// giveBackClient returns a Client on its own etcd client and session to
// c's endpoints (or to endpoints, if given), with the test's prefix.
func giveBackClient(t *testing.T, c *etcdtest.Cluster, pfx string, endpoints ...string) *dlock.Client {
	t.Helper()
	var s *etcdstore.Store
	if len(endpoints) == 0 {
		s, _ = newStore(t, c, pfx, giveBackTTL)
	} else {
		var err error
		if s, err = etcdstore.New(etcdtest.NewClient(t, endpoints...), etcdstore.Options{Prefix: pfx, SessionTTL: giveBackTTL}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(ctxT(t, 5*time.Second)) })
	}
	dc, err := dlock.New(s)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, dc)
	return dc
}

// TestReleaseWithEndedContextGivesKeyBack: Lease.Release with a context
// that already ended returns ErrUnavailable with the context's error, and
// the key is free for another client within faulttest.GiveBackBound.
func TestReleaseWithEndedContextGivesKeyBack(t *testing.T) {
	c, pfx := node(t), uniq(t)
	holder, other := giveBackClient(t, c, pfx), giveBackClient(t, c, pfx)
	faulttest.ReleaseEnded(t, ctxT(t, 60*time.Second), holder, other, "k", faulttest.GiveBackBound)
}

// TestReleaseLostInBlipIsRetried: the holder's etcd client reaches the
// server through a fault proxy that drops every request for 300 ms while
// the key is released, then resets the connections; another lease of the
// same store is renewed all along (the session stays alive). The key must
// be free for another client within faulttest.BlipGiveBackBound of the
// reset. Control: the same blip with the Release sent after it frees the
// key within the same bound (the reconnection fits in it).
func TestReleaseLostInBlipIsRetried(t *testing.T) {
	for _, tc := range faulttest.Blips {
		t.Run(tc.Name, func(t *testing.T) {
			c, pfx := node(t), uniq(t)
			p, err := faultproxy.New(c.Members[0].Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			holder, other := giveBackClient(t, c, pfx, p.Addr()), giveBackClient(t, c, pfx)
			tc.Run(t, ctxT(t, 60*time.Second), holder, other, p, "k", 300*time.Millisecond, faulttest.BlipGiveBackBound)
		})
	}
}

// TestNestedFixedLeaseRunOutGivesKeyBack: Do(k){ Do(k, WithTTL(T)){ work
// T+0.5s } } with T the session TTL: the nested lease runs out under the
// outer one, both return, and the key must be free for another client
// within faulttest.GiveBackBound. Control: the same fixed lease, not
// nested, is given back within the same bound.
func TestNestedFixedLeaseRunOutGivesKeyBack(t *testing.T) {
	for _, tc := range faulttest.RunOuts {
		t.Run(tc.Name, func(t *testing.T) {
			c, pfx := node(t), uniq(t)
			holder, other := giveBackClient(t, c, pfx), giveBackClient(t, c, pfx)
			tc.Run(t, ctxT(t, 60*time.Second), holder, other, "k", giveBackTTL, faulttest.GiveBackBound)
		})
	}
}

// TestCloseWaitsForGiveBack: Close right after a Release with an ended
// context waits for the background give-back: once Close returned,
// another client's first TryLock takes the key (the holder's store, and
// so its session, still open).
func TestCloseWaitsForGiveBack(t *testing.T) {
	c, pfx := node(t), uniq(t)
	holder, other := giveBackClient(t, c, pfx), giveBackClient(t, c, pfx)
	faulttest.ReleaseEndedThenClose(t, ctxT(t, 60*time.Second), holder, other, "k")
}

// TestLostAcquireOfOwnerGivesKeyBack (faulttest.LostAcquire): Lock as an
// explicit Owner (holding nothing else) is cancelled once etcd applied it,
// its reply held back by the fault proxy; the proxy then resets the
// connections. The owner's last live holding has ended, so the Client
// must give back what its token holds: the key free for another client
// within faulttest.BlipGiveBackBound of the reset. own-token: the same
// Lock without an Owner (a token of the call's own), same bound. Both
// pass on 835c212 (etcd withdraws the queued acquisition when the call
// ends): a guard, not the evidence.
func TestLostAcquireOfOwnerGivesKeyBack(t *testing.T) {
	for _, owner := range []bool{true, false} {
		t.Run(map[bool]string{true: "owner", false: "own-token"}[owner], func(t *testing.T) {
			c, pfx := node(t), uniq(t)
			p, err := faultproxy.New(c.Members[0].Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			holder, other := giveBackClient(t, c, pfx, p.Addr()), giveBackClient(t, c, pfx)
			faulttest.LostAcquire(t, ctxT(t, 60*time.Second), holder, other, p, "k", owner, faulttest.BlipGiveBackBound)
		})
	}
}
