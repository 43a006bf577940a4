package zkstore_test

import (
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/zkstore"
)

// Holdings that end without a confirmed release are given back by the
// Client in the background (issue 23, "Locks that stay held after they
// were given back"): a ZooKeeper session keeps its lock nodes until it
// ends, and go-zookeeper keeps it alive with its own pings, so a key
// nobody gives back stays held until the store is closed. Each test has
// another Client, on a connection and session of its own (as another
// process), take the key within the bound it states. Negative control:
// the same tests on the code before the background give-back (835c212)
// fail, the key still held at the end of the watch
// (faulttest.GiveBackWatch).

// giveBackTimeout is the session timeout of these tests: short, so that a
// nested fixed lease runs out quickly.
const giveBackTimeout = 2 * time.Second

// giveBackClient returns a Client on s.
func giveBackClient(t *testing.T, s *zkstore.Store) *dlock.Client {
	t.Helper()
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
	root, addrs := uniq(t), server(t).Addrs()
	holder := giveBackClient(t, dial(t, root, giveBackTimeout, addrs...))
	other := giveBackClient(t, dial(t, root, giveBackTimeout, addrs...))
	faulttest.ReleaseEnded(t, ctxT(t, 60*time.Second), holder, other, "k", faulttest.GiveBackBound)
}

// TestReleaseLostInBlipIsRetried: the holder's connection goes through a
// fault proxy that drops every request for 300 ms while the key is
// released, then resets the connection; go-zookeeper reconnects within the
// session, and another lease of the same store is renewed all along. The
// key must be free for another client within faulttest.BlipGiveBackBound
// of the reset. Control: the same blip with the Release sent after it
// frees the key within the same bound (the reconnection fits in it).
func TestReleaseLostInBlipIsRetried(t *testing.T) {
	for _, tc := range faulttest.Blips {
		t.Run(tc.Name, func(t *testing.T) {
			root, addrs := uniq(t), server(t).Addrs()
			// A longer session: the holder's renewed lease (see
			// faulttest.KeepSession) must outlast the blip plus the
			// reconnection, which took over a second at load 8-19; a
			// session ending still fails the test (the ID check below).
			h := dialProxied(t, root, 2*giveBackTimeout, addrs[0])
			holder := giveBackClient(t, h.Store)
			other := giveBackClient(t, dial(t, root, 2*giveBackTimeout, addrs...))
			sid := h.Conn().SessionID()
			tc.Run(t, ctxT(t, 60*time.Second), holder, other, h.p, "k", 300*time.Millisecond, faulttest.BlipGiveBackBound)
			if got := h.Conn().SessionID(); got != sid {
				t.Errorf("the holder's session changed across the blip (%x, then %x): the key was freed with the old one", sid, got)
			}
		})
	}
}

// TestNestedFixedLeaseRunOutGivesKeyBack: Do(k){ Do(k, WithTTL(T)){ work
// T+0.5s } } with T the session timeout: the nested lease runs out under
// the outer one, both return, and the key must be free for another client
// within faulttest.GiveBackBound. Control: the same fixed lease, not
// nested, is given back within the same bound.
func TestNestedFixedLeaseRunOutGivesKeyBack(t *testing.T) {
	for _, tc := range faulttest.RunOuts {
		t.Run(tc.Name, func(t *testing.T) {
			root, addrs := uniq(t), server(t).Addrs()
			holder := giveBackClient(t, dial(t, root, giveBackTimeout, addrs...))
			other := giveBackClient(t, dial(t, root, giveBackTimeout, addrs...))
			tc.Run(t, ctxT(t, 60*time.Second), holder, other, "k", giveBackTimeout, faulttest.GiveBackBound)
		})
	}
}

// TestCloseWaitsForGiveBack: Close right after a Release with an ended
// context waits for the background give-back: once Close returned,
// another client's first TryLock takes the key (the holder's store, and
// so its session, still open).
func TestCloseWaitsForGiveBack(t *testing.T) {
	root, addrs := uniq(t), server(t).Addrs()
	holder := giveBackClient(t, dial(t, root, giveBackTimeout, addrs...))
	other := giveBackClient(t, dial(t, root, giveBackTimeout, addrs...))
	faulttest.ReleaseEndedThenClose(t, ctxT(t, 60*time.Second), holder, other, "k")
}

// TestLostAcquireOfOwnerGivesKeyBack (faulttest.LostAcquire): Lock as an
// explicit Owner (holding nothing else) is cancelled once ZooKeeper
// applied it, its reply held back by the fault proxy; the proxy then
// resets the connection (go-zookeeper reconnects within the session). The
// owner's last live holding has ended, so the Client must give back what
// its token holds: the key free for another client within
// faulttest.BlipGiveBackBound of the reset. own-token: the same Lock
// without an Owner (a token of the call's own), same bound. Both fail on
// 835c212: the owner's hold is never given back, and the one background
// release of the call's own token is lost with the reset, never retried.
func TestLostAcquireOfOwnerGivesKeyBack(t *testing.T) {
	for _, owner := range []bool{true, false} {
		t.Run(map[bool]string{true: "owner", false: "own-token"}[owner], func(t *testing.T) {
			root, addrs := uniq(t), server(t).Addrs()
			// A longer session: the proxy delays every reply of the holder
			// by 400 ms, one chunk after another, and its renewals must
			// outlast that.
			h := dialProxied(t, root, 2*giveBackTimeout, addrs[0])
			holder := giveBackClient(t, h.Store)
			other := giveBackClient(t, dial(t, root, 2*giveBackTimeout, addrs...))
			faulttest.LostAcquire(t, ctxT(t, 60*time.Second), holder, other, h.p, "k", owner, faulttest.BlipGiveBackBound)
		})
	}
}
