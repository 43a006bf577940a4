package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/etcdstore"
	"example.com/dlock/etcdstore/internal/etcdtest"
	"example.com/dlock/internal/chaos/faultproxy"
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

// The holder's keepalives stop reaching the server while the replies to the
// last ones arrive late (held, then blackholed upstream). The dlock Lease on
// this store reports its loss before the server frees the key, as seen by a
// watch from another client, and before another store can take it. The
// negative control is etcd's concurrency.Session through the same proxy:
// it counts from the reply, so its Done closes after the server freed its
// own key.
func TestLossSignalledBeforeServerFrees(t *testing.T) {
	c := node(t)
	p, err := faultproxy.New(c.Members[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	const ttl = 4 * time.Second
	pfx := uniq(t)
	holderCli := etcdtest.NewClient(t, p.Addr())
	sessCli := etcdtest.NewClient(t, p.Addr())
	watcher := c.Client(t)
	hs, err := etcdstore.New(holderCli, etcdstore.Options{Prefix: pfx, SessionTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := newStore(t, c, pfx, ttl)
	ctx := ctxT(t, 40*time.Second)

	dc, err := dlock.New(hs, dlock.WithAutoRenew(ttl), dlock.WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	l, err := dc.Lock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	first, err := watcher.Get(ctx, pfx+"x/", clientv3.WithFirstCreate()...)
	if err != nil || len(first.Kvs) != 1 {
		t.Fatal(first, err)
	}
	ourDeleted := deleteTime(ctx, watcher, string(first.Kvs[0].Key), first.Header.Revision+1)

	sess, err := concurrency.NewSession(sessCli, concurrency.WithTTL(int(ttl/time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	sessKey := pfx + "session-marker"
	put, err := watcher.Put(ctx, sessKey, "", clientv3.WithLease(sess.Lease()))
	if err != nil {
		t.Fatal(err)
	}
	sessDeleted := deleteTime(ctx, watcher, sessKey, put.Header.Revision+1)

	taken := make(chan time.Time, 1)
	go func() {
		_, err := other.AcquireQueued(ctx, "x", tok(), ttl)
		if err != nil {
			t.Errorf("other store: %v", err)
		}
		taken <- time.Now()
	}()

	// Replies held: requests (keepalives) still reach the server; then
	// requests stop too; then the held replies arrive, late.
	release := p.Hold(faultproxy.Downstream)
	select {
	case <-time.After(ttl / 2): // the fault's duration
	case <-l.Done():
		t.Fatal("lost before the fault could matter")
	}
	p.Blackhole(faultproxy.Upstream, true)
	select {
	case <-time.After(ttl / 2): // the fault's duration
	case <-ctx.Done():
	}
	release()

	var lostAt, sessDoneAt time.Time
	select {
	case <-l.Done():
		lostAt = time.Now()
	case <-ctx.Done():
		t.Fatal("the lease never reported its loss")
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("lease error %v, want ErrLost", err)
	}
	select {
	case <-sess.Done():
		sessDoneAt = time.Now()
	case <-ctx.Done():
		t.Fatal("the Session never closed Done")
	}
	freedAt, sessFreedAt, takenAt := <-ourDeleted, <-sessDeleted, <-taken
	t.Logf("dlock lease lost %v before the server freed its key (taken %v after the loss); Session.Done %v after the server freed its key",
		freedAt.Sub(lostAt), takenAt.Sub(lostAt), sessDoneAt.Sub(sessFreedAt))
	if freedAt.IsZero() || !lostAt.Before(freedAt) || !lostAt.Before(takenAt) {
		t.Fatalf("loss reported at %v, key freed at %v, taken at %v", lostAt, freedAt, takenAt)
	}
	if !sessDoneAt.After(sessFreedAt) {
		t.Errorf("negative control: Session.Done closed %v before the server freed its key; the fault did not show the reply-time flaw", sessFreedAt.Sub(sessDoneAt))
	}
	p.Clear()
}
