package zkstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/zkserver"
	"github.com/go-zookeeper/zk"
)

// The leader of a 3-server ensemble is SIGKILLed while a lock is held and
// two Clients (each with its own connection to every server, so its own
// session) contend for it. Invariant: no two holders at any time (the
// overlap detector over every holding of both Clients); the held lease
// survives the election (ZooKeeper moves the session to another server) or
// reports its loss before anyone else holds the key; the ensemble serves
// the contenders after the kill. Negative control (broken=true): the same
// scenario on a store that skips the owner check shows overlaps.
func TestLeaderKilledWhileHeld(t *testing.T) {
	e := zkserver.StartEnsemble(t, 3)
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprintf("broken=%v", broken), func(t *testing.T) { leaderKilled(t, e, broken) })
	}
}

func leaderKilled(t *testing.T, e *zkserver.Ensemble, broken bool) {
	root, seed := testPath(t), faulttest.Seed(t, "ZKSTORE_FAULT_SEED")
	var clients [2]*dlock.Client
	var conns [2]*zk.Conn
	for i := range clients {
		s, conn := newFaultStore(t, e.Addrs(), root, faultTimeout)
		conns[i] = conn
		var m driver.Mutex = s
		if broken {
			m = faulttest.NoOwnerCheck{Mutex: s}
		}
		clients[i] = newFaultClient(t, m, faultTimeout)
	}
	ctx := testCtx(t, 90*time.Second)
	leader := -1
	var sid int64
	r := faulttest.LeaderKill{Clients: clients[:], Seed: seed, Hold: 2 * faultTimeout, Settle: 20 * time.Second, // the long holding across the election
		Kill: func() {
			if leader = e.Leader(10 * time.Second); leader < 0 {
				t.Fatal("no leader")
			}
			sid = conns[0].SessionID()
			e.Kill(leader)
			t.Cleanup(func() { restart(t, e, leader) })
		}}.Run(t, ctx)
	x := r.Long
	t.Logf("RESULT leader %d killed; long holder lost=%v (held %v after the kill), its session survived %v; %d holdings, %d after the long one; lock errors %v; %d overlaps",
		leader, x.Lost, x.To.Sub(r.KilledAt).Round(time.Millisecond), conns[0].SessionID() == sid, len(r.Rec.Windows()), r.After, r.Rec.Errs(), len(r.Rec.Overlaps()))
	if faulttest.CheckOverlaps(t, r.Rec, broken); broken {
		return
	}
	if r.After < 20 {
		t.Fatalf("only %d holdings in 20 s after the long one: the ensemble did not serve after the kill", r.After)
	}
}

// restart brings server i back and waits until the ensemble serves again.
func restart(t *testing.T, e *zkserver.Ensemble, i int) {
	if err := e.Restart(i); err != nil {
		t.Errorf("restart server %d: %v", i, err)
		return
	}
	if err := e.WaitServing(30 * time.Second); err != nil {
		t.Errorf("ensemble after restarting server %d: %v", i, err)
	}
}

// waitAndHold makes dc wait for "k" (at most 6 session timeouts) and hold it
// 50 ms once granted, recording the window; got receives the window (zero
// if Lock failed).
func waitAndHold(ctx context.Context, dc *dlock.Client, rec *windows) <-chan window {
	got := make(chan window, 1)
	go func() {
		l, err := dc.Lock(ctx, "k", dlock.WithWait(6*faultTimeout))
		if err != nil {
			rec.Fail(err)
			got <- window{}
			return
		}
		got <- faulttest.Hold(l, time.Now(), "other", 50*time.Millisecond, true, rec)
	}()
	return got
}

// The holder reaches the ensemble only through a fault proxy to one server,
// which then blackholes both directions for three session timeouts, while a
// second Client (direct connections to every server) waits for the key.
// Invariants: the holder's session expires and its lease reports the loss
// before the other Client is granted the key (no overlap); the next holder
// has a greater fence; the stale holder's fenced write (after the cut
// heals) is rejected by the fenced resource, which keeps the new holder's
// value. Negative controls: the same stale write unfenced lands over the
// new holder's value; a holder that ignores its lost signal overlaps the
// next holder; a store that overclaims its session by one timeout reports
// the loss after the next holder got the key.
func TestCutHolderSessionExpires(t *testing.T) {
	e := zkserver.StartEnsemble(t, 3)
	for _, tc := range []cutCase{
		{name: "fenced", heed: true},
		{name: "control-unfenced-write", heed: true, unfenced: true},
		{name: "control-ignores-loss"},
		{name: "control-overclaims", heed: true, overclaim: true},
	} {
		t.Run(tc.name, func(t *testing.T) { cutHolder(t, e, tc) })
	}
}

// cutCase is one variant of TestCutHolderSessionExpires.
type cutCase struct {
	name                      string
	heed, unfenced, overclaim bool
}

func cutHolder(t *testing.T, e *zkserver.Ensemble, tc cutCase) {
	p, err := faultproxy.New(e.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	root := testPath(t)
	hs, hconn := newFaultStore(t, []string{p.Addr()}, root, faultTimeout)
	ostore, oconn := newFaultStore(t, e.Addrs(), root, faultTimeout)
	var hm driver.Mutex = hs
	lease := faultTimeout
	if tc.overclaim {
		hm, lease = faulttest.Overclaim{Store: hs, More: hs.SessionTimeout()}, 2*faultTimeout // the lease its Model claims
	}
	hc, oc := newFaultClient(t, hm, lease), newFaultClient(t, ostore, faultTimeout)
	res := root + "-resource"
	if _, err := oconn.Create(res, []byte("0 initial"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 90*time.Second)
	l, err := hc.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Now()
	if ok, err := fencedWrite(hconn, res, l.Fence(), "holder", false); !ok || err != nil {
		t.Fatalf("the holder's fenced write before the cut: %v %v", ok, err)
	}
	rec := &windows{}
	got := waitAndHold(ctx, oc, rec)
	pollUntil(t, 20*time.Second, "the other Client queued", func() bool {
		kids, _, err := oconn.Children(root + "/k")
		return err == nil && len(kids) > 1
	})
	cutAt := time.Now()
	p.Blackhole(faultproxy.Upstream, true)
	p.Blackhole(faultproxy.Downstream, true)
	x := faulttest.Hold(l, from, "cut", 3*faultTimeout, tc.heed, rec)
	y := <-got
	var newWrite bool
	if y.Who != "" {
		newWrite, err = fencedWrite(oconn, res, y.Fence, "next holder", false)
		if err != nil {
			t.Fatal(err)
		}
	}
	p.Clear()
	p.ResetAll() // the connections left silent by the cut: the client redials at once
	healedAt := time.Now()
	stale, err := retryWrite(hconn, res, x.Fence, "stale holder", tc.unfenced)
	if err != nil {
		t.Fatalf("the stale holder's write: %v", err)
	}
	value := resourceValue(t, oconn, res)
	t.Logf("the stale holder's write returned %v after the cut healed", time.Since(healedAt).Round(time.Millisecond))

	cutChecks(t, tc, cutOutcome{x: x, y: y, newWrite: newWrite, stale: stale, value: value, cutAt: cutAt, rec: rec})
}

// cutOutcome is what one run of cutHolder saw.
type cutOutcome struct {
	x, y            window // the cut holder's and the next holder's
	newWrite, stale bool   // whether their fenced writes landed
	value           string // the resource's value at the end
	cutAt           time.Time
	rec             *windows
}

// cutChecks logs o and checks it against tc's expectation.
func cutChecks(t *testing.T, tc cutCase, o cutOutcome) {
	x, y, rec := o.x, o.y, o.rec
	bad := rec.Overlaps()
	t.Logf("RESULT heed %v, unfenced %v: holder (fence %d) lost=%v %v after the cut; other (fence %d) granted %v after the cut, %v after the holder stopped; next holder's write landed %v, stale write landed %v; resource %q; lock errors %v; %d overlaps",
		tc.heed, tc.unfenced, x.Fence, x.Lost, x.To.Sub(o.cutAt).Round(time.Millisecond), y.Fence,
		y.From.Sub(o.cutAt).Round(time.Millisecond), y.From.Sub(x.To).Round(time.Millisecond), o.newWrite, o.stale, o.value, rec.Errs(), len(bad))
	switch {
	case !tc.heed:
		if len(bad) == 0 {
			t.Fatal("negative control: a holder ignoring its loss did not overlap the next one")
		}
	case tc.overclaim:
		if y.Who != "" && x.To.Before(y.From) {
			t.Fatal("negative control: the overclaiming store reported the loss before the next holder got the key")
		}
	case tc.unfenced:
		if !o.stale || o.value != "stale holder" {
			t.Fatal("negative control: the unfenced stale write did not land; the test cannot see the bug")
		}
	case len(bad) > 0:
		t.Fatalf("%d overlaps: %s", len(bad), strings.Join(bad, "; "))
	case y.Who == "":
		t.Fatalf("the other Client never got the key: %v", rec.Errs())
	case !x.Lost:
		t.Fatal("a holder cut off for three session timeouts kept its lease")
	case !x.To.Before(y.From):
		t.Fatalf("the loss was reported %v after the other Client got the key", x.To.Sub(y.From))
	case y.Fence <= x.Fence:
		t.Fatalf("next holder's fence %d not greater than the cut holder's %d", y.Fence, x.Fence)
	case !o.newWrite:
		t.Fatal("the next holder's fenced write was rejected")
	case o.stale || o.value != "next holder":
		t.Fatalf("the stale fenced write landed=%v; resource %q", o.stale, o.value)
	}
}
