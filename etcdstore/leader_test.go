package etcdstore_test

import (
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/etcdstore"
	"example.com/dlock/etcdstore/internal/etcdtest"
	"example.com/dlock/internal/faulttest"
)

// The holder's etcd client knows only the leader, which is SIGKILLed while
// the lock is held; Client B waits for the key on every endpoint. The
// holder cannot renew through another member, so this is the other branch
// of R28's invariant: its lease must report its loss before B is granted
// the key (no two holders). Negative control: the same kill with a holder
// that ignores the lost signal overlaps B.
func TestLeaderKilledHolderOnLeaderOnly(t *testing.T) {
	for _, heed := range []bool{true, false} {
		name := "heed"
		if !heed {
			name = "control-ignores-loss"
		}
		t.Run(name, func(t *testing.T) { holderOnLeader(t, heed) })
	}
}

func holderOnLeader(t *testing.T, heed bool) {
	c := etcdtest.StartCluster(t, 3)
	ctx := ctxT(t, 60*time.Second)
	leader, err := c.Leader(ctx, c.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	pfx := uniq(t)
	hs, err := etcdstore.New(etcdtest.NewClient(t, leader.ClientURL), etcdstore.Options{Prefix: pfx, SessionTTL: faultTTL})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := newStore(t, c, pfx, faultTTL)
	hc, err1 := dlock.New(hs, dlock.WithAutoRenew(faultTTL))
	oc, err2 := dlock.New(other, dlock.WithAutoRenew(faultTTL))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	l, err := hc.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Now()
	rec := &windows{}
	got, waiting := waitAndHold(ctx, oc, rec)
	select {
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("the other Client never tried")
	}
	killedAt := time.Now()
	leader.Kill()
	x := faulttest.Hold(l, from, "on-leader", 3*faultTTL, heed, rec)
	y := <-got

	bad := rec.Overlaps()
	t.Logf("RESULT leader %s killed, heed %v: holder lost=%v %v after the kill; other granted %v after the kill (%v after the holder stopped); lock errors %v; %d overlaps",
		leader.Name, heed, x.Lost, x.To.Sub(killedAt).Round(time.Millisecond), y.From.Sub(killedAt).Round(time.Millisecond),
		y.From.Sub(x.To).Round(time.Millisecond), rec.Errs(), len(bad))
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
	if !x.Lost {
		t.Fatal("a holder whose only member died kept its lease for three session TTLs")
	}
}
