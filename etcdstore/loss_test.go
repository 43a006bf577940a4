package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	"example.com/dlock/etcdstore/internal/etcdtest"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/faulttest"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// deleteTime watches key from a separate client and reports when its
// DELETE is seen (the server freed it), or the zero time at ctx's end.
func deleteTime(ctx context.Context, cli *clientv3.Client, key string, rev int64) <-chan time.Time {
	out := make(chan time.Time, 1)
	wch := cli.Watch(ctx, key, clientv3.WithRev(rev))
	go func() {
		for wr := range wch {
			for _, e := range wr.Events {
				if e.Type == mvccpb.DELETE {
					out <- time.Now()
					return
				}
			}
		}
		out <- time.Time{}
	}()
	return out
}

// The holder's keepalives stop reaching the server (replies held for 2 s,
// then requests blackholed too, then the held replies arrive late). The
// dlock Lease on this store reports its loss before the server frees the
// key, as seen by a watch from another client, and before another store
// takes it. Negative control: the same run on a store that overclaims its
// session by one TTL (faulttest.Overclaim, as a store counting from a late
// reply, or from nothing, would; with a client asking for 2 TTL) reports
// the loss after the key was taken. etcd's own
// concurrency.Session, through the same faults, is measured and logged.
func TestLossSignalledBeforeServerFrees(t *testing.T) {
	for _, broken := range []bool{false, true} {
		name := map[bool]string{false: "store", true: "overclaiming-control"}[broken]
		t.Run(name, func(t *testing.T) {
			lostAt, freedAt, takenAt := lossRun(t, broken)
			t.Logf("lease lost %v before the server freed the key and %v before another store took it",
				freedAt.Sub(lostAt), takenAt.Sub(lostAt))
			ok := !freedAt.IsZero() && lostAt.Before(freedAt) && lostAt.Before(takenAt)
			if ok == broken {
				t.Fatalf("broken=%v: loss reported at %v, key freed at %v, taken at %v", broken,
					lostAt.Format(time.StampMilli), freedAt.Format(time.StampMilli), takenAt.Format(time.StampMilli))
			}
		})
	}
}

func lossRun(t *testing.T, broken bool) (lostAt, freedAt, takenAt time.Time) {
	c := node(t)
	p, err := faultproxy.New(c.Members[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	const ttl = 5 * time.Second
	pfx := uniq(t)
	watcher := c.Client(t)
	hs, err := etcdstore.New(etcdtest.NewClient(t, p.Addr()), etcdstore.Options{Prefix: pfx, SessionTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	var store driver.Mutex = hs
	if broken {
		store = faulttest.Overclaim{Store: hs, More: hs.SessionTTL()} // one TTL more
	}
	other, _ := newStore(t, c, pfx, ttl)
	ctx := ctxT(t, 40*time.Second)
	lease := ttl
	if broken {
		// The client also asks for twice the TTL, so that a failed renewal
		// does not cut the validity to its start plus the TTL (which would
		// hide the store's overclaim).
		lease = 2 * ttl
	}
	l, freed := lockAndWatch(t, ctx, store, lease, watcher, pfx+"x/")
	sessDone, sessFreed := etcdSession(t, ctx, p.Addr(), watcher, pfx, ttl, !broken)
	taken := make(chan time.Time, 1)
	go func() {
		_, err := other.AcquireQueued(ctx, "x", tok(), ttl)
		if err != nil {
			t.Errorf("other store: %v", err)
		}
		taken <- time.Now()
	}()

	holdAt := stallKeepalives(ctx, p, l)
	select {
	case <-l.Done():
		lostAt = time.Now()
	case <-ctx.Done():
		t.Fatal("the lease never reported its loss")
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("lease error %v, want ErrLost", err)
	}
	freedAt, takenAt = <-freed, <-taken
	if sessDone != nil {
		d, f := <-sessDone, <-sessFreed
		t.Logf("from the hold: lease lost %v, key freed %v; concurrency.Session.Done %v, its key freed %v",
			lostAt.Sub(holdAt), freedAt.Sub(holdAt), d.Sub(holdAt), f.Sub(holdAt))
	}
	p.Clear()
	return lostAt, freedAt, takenAt
}

// etcdSession starts etcd's concurrency.Session through the proxy, with a
// key in its lease, and reports when its Done closes and when the server
// frees its key (for the log: etcd counts from the reply). nil channels if
// !on.
func etcdSession(t *testing.T, ctx context.Context, addr string, watcher *clientv3.Client, pfx string, ttl time.Duration, on bool) (done, freed <-chan time.Time) {
	if !on {
		return nil, nil
	}
	sess, err := concurrency.NewSession(etcdtest.NewClient(t, addr), concurrency.WithTTL(int(ttl/time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	put, err := watcher.Put(ctx, pfx+"session-marker", "", clientv3.WithLease(sess.Lease()))
	if err != nil {
		t.Fatal(err)
	}
	d := make(chan time.Time, 1)
	go func() {
		select {
		case <-sess.Done():
			d <- time.Now()
		case <-ctx.Done():
			d <- time.Time{}
		}
	}()
	return d, deleteTime(ctx, watcher, pfx+"session-marker", put.Header.Revision+1)
}

// stallKeepalives holds the replies for 2 s (longer than a renewal period:
// requests, keepalives among them, still reach the server), then blackholes
// the requests too for 2 s, then lets the held replies through. It returns
// when the hold began.
func stallKeepalives(ctx context.Context, p *faultproxy.Proxy, l *dlock.Lease) time.Time {
	holdAt := time.Now()
	release := p.Hold(faultproxy.Downstream)
	select {
	case <-time.After(2 * time.Second): // the fault's duration
	case <-l.Done():
	}
	p.Blackhole(faultproxy.Upstream, true)
	select {
	case <-time.After(2 * time.Second): // the fault's duration
	case <-ctx.Done():
	}
	release()
	return holdAt
}

// lockAndWatch takes lock "x" with a dlock Client on store, renewed every
// lease/3, and watches its etcd key from watcher for its deletion.
func lockAndWatch(t *testing.T, ctx context.Context, store driver.Mutex, lease time.Duration, watcher *clientv3.Client, pfx string) (*dlock.Lease, <-chan time.Time) {
	dc, err := dlock.New(store, dlock.WithAutoRenew(lease))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, dc)
	return lockKeyAndWatch(t, ctx, dc, "x", watcher, pfx)
}

// lockKeyAndWatch takes lock key with dc and watches its etcd key (the
// first-created under pfx) from watcher for its deletion.
func lockKeyAndWatch(t *testing.T, ctx context.Context, dc *dlock.Client, key string, watcher *clientv3.Client, pfx string) (*dlock.Lease, <-chan time.Time) {
	t.Helper()
	l, err := dc.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	first, err := watcher.Get(ctx, pfx, clientv3.WithFirstCreate()...)
	if err != nil || len(first.Kvs) != 1 {
		t.Fatal(first, err)
	}
	return l, deleteTime(ctx, watcher, string(first.Kvs[0].Key), first.Header.Revision+1)
}
