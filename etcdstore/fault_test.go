package etcdstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	"example.com/dlock/etcdstore/internal/etcdtest"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/faulttest"
)

// The leader of a 3-member cluster is SIGKILLed while a lock is held and
// two Clients (each with its own etcd client and session) contend for it.
// Invariant: no two holders at any time (the overlap detector over every
// holding of both Clients); the held lease survives the election (renewal
// through another member) or reports its loss before anyone else holds the
// key; the cluster serves the contenders after the kill. Negative control
// (broken=true): the same scenario on a store that skips the owner check
// must show overlaps.
func TestLeaderKilledWhileHeld(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprintf("broken=%v", broken), func(t *testing.T) { leaderKilled(t, broken) })
	}
}

func leaderKilled(t *testing.T, broken bool) {
	c := etcdtest.StartCluster(t, 3)
	pfx, seed := uniq(t), faulttest.Seed(t, "ETCDSTORE_FAULT_SEED")
	var clients [2]*dlock.Client
	for i := range clients {
		s, _ := newStore(t, c, pfx, faultTTL)
		var m driver.Mutex = s
		if broken {
			m = faulttest.NoOwnerCheck{Mutex: s}
		}
		dc, err := dlock.New(m, dlock.WithAutoRenew(faultTTL))
		if err != nil {
			t.Fatal(err)
		}
		faulttest.CloseOnCleanup(t, dc)
		clients[i] = dc
	}
	ctx := ctxT(t, 60*time.Second)
	var leader *etcdtest.Member
	r := faulttest.LeaderKill{Clients: clients[:], Seed: seed, Hold: 2 * faultTTL, Settle: 10 * time.Second, // the long holding across the election
		Kill: func() {
			var err error
			if leader, err = c.Leader(ctx, c.Client(t)); err != nil {
				t.Fatal(err)
			}
			leader.Kill()
		}}.Run(t, ctx)
	x := r.Long
	if r.After < 20 {
		t.Fatalf("timed out after 10s waiting for grants after the kill: %d", r.After)
	}
	t.Logf("RESULT leader %s killed; long holder lost=%v (held %v after the kill); %d holdings, %d after the long one; lock errors %v; %d overlaps",
		leader.Name, x.Lost, x.To.Sub(r.KilledAt).Round(time.Millisecond), len(r.Rec.Windows()), r.After, r.Rec.Errs(), len(r.Rec.Overlaps()))
	faulttest.CheckOverlaps(t, r.Rec, broken)
}

// waitAndHold makes oc wait for "k" (at most 6 session TTLs) and hold it
// 50 ms once granted. waiting closes once an attempt was refused; got
// receives the holding's window (zero if Lock failed).
func waitAndHold(ctx context.Context, oc *dlock.Client, rec *windows) (got <-chan window, waiting <-chan struct{}) {
	g, w := make(chan window, 1), make(chan struct{})
	var once sync.Once
	// The Client waits in etcd's queue (one AcquireQueued call, no retries
	// to tell of): it is waiting once the store counts a queued waiter.
	if wc, ok := driver.As[driver.WaiterCounter](oc.Store()); ok {
		go func() {
			for ctx.Err() == nil {
				if n, err := wc.Waiters(ctx, "k"); err == nil && n > 0 {
					once.Do(func() { close(w) })
					return
				}
				time.Sleep(20 * time.Millisecond) // polling the store's queue, bounded by ctx
			}
		}()
	}
	go func() {
		l, err := oc.Lock(ctx, "k", dlock.WithWait(6*faultTTL),
			dlock.WithOnRetry(func(int, error) { once.Do(func() { close(w) }) }))
		if err != nil {
			rec.Fail(err)
			g <- window{}
			return
		}
		g <- faulttest.Hold(l, time.Now(), "other", 50*time.Millisecond, true, rec)
	}()
	return g, w
}

// The holder's etcd client reaches the cluster through a fault proxy to one
// member, which is then partitioned (blackholed both ways), while a second
// Client waits for the key on direct connections. Invariant: no two
// holders; a holder that cannot fail over (its only endpoint is the
// proxy) reports its loss before the other Client is granted the key; one
// with the other members as endpoints too fails over (keeps the lease) or
// reports its loss in time. Negative control: the same partition with a
// holder that ignores the lost signal overlaps the next holder.
func TestPartitionedMember(t *testing.T) {
	for _, tc := range []struct {
		name           string
		failover, heed bool
	}{
		{"one-endpoint", false, true},
		{"failover", true, true},
		{"control-ignores-loss", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) { partitioned(t, tc.failover, tc.heed) })
	}
}

func partitioned(t *testing.T, failover, heed bool) {
	c := etcdtest.StartCluster(t, 3)
	p, err := faultproxy.New(c.Members[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	pfx := uniq(t)
	eps := []string{p.Addr()}
	if failover {
		eps = append(eps, c.Members[1].Addr(), c.Members[2].Addr())
	}
	hs, err := etcdstore.New(etcdtest.NewClient(t, eps...), etcdstore.Options{Prefix: pfx, SessionTTL: faultTTL})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := newStore(t, c, pfx, faultTTL)
	hc, err1 := dlock.New(hs, dlock.WithAutoRenew(faultTTL))
	oc, err2 := dlock.New(other, dlock.WithAutoRenew(faultTTL))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	ctx := ctxT(t, 60*time.Second)
	l, err := hc.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Now()
	rec := &windows{}
	got, waiting := waitAndHold(ctx, oc, rec)
	select {
	case <-waiting: // refused once: it waits
	case <-ctx.Done():
		t.Fatal("the other Client never tried")
	}
	cutAt := time.Now()
	p.Blackhole(faultproxy.Upstream, true)
	p.Blackhole(faultproxy.Downstream, true)
	x := faulttest.Hold(l, from, "partitioned", 2*faultTTL, heed, rec)
	y := <-got
	p.Clear()

	bad := rec.Overlaps()
	t.Logf("RESULT endpoints %d, heed %v: holder lost=%v %v after the cut, its release took %v (%v); other granted %v after the cut (%v after the holder stopped); lock errors %v; %d overlaps",
		len(eps), heed, x.Lost, x.To.Sub(cutAt).Round(time.Millisecond), x.Release.Round(time.Millisecond), x.RelErr,
		y.From.Sub(cutAt).Round(time.Millisecond), y.From.Sub(x.To).Round(time.Millisecond), rec.Errs(), len(bad))
	if !heed {
		if len(bad) == 0 {
			t.Fatal("negative control: a holder ignoring its loss did not overlap the next one")
		}
		return
	}
	if len(bad) > 0 {
		t.Fatalf("%d overlaps: %s", len(bad), strings.Join(bad, "; "))
	}
	if y.Who == "" {
		t.Fatalf("the other Client never got the key: %v", rec.Errs())
	}
	if !failover && !x.Lost {
		t.Fatal("a holder cut off from every member kept its lease for two session TTLs")
	}
}
