package etcdstore_test

import (
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"example.com/dlock/etcdstore"
)

// SubscribeRW wakes its waiters on a read holding's deletion only if it
// left no read holding: the first of two readers leaving wakes no one, the
// second does, and so do the writer's release and a downgrade; a mark's
// deletion does not. The events
// are the real ones of a watch on the key's prefix, each judged by the
// filter SubscribeRW uses, so nothing is timed. Control: the last reader's
// deletion, the writer's and the downgrade's are judged worth a wake (the
// filter before this change woke on every one).
func TestRWWakesOnlyWhenAHoldingCanGetIn(t *testing.T) {
	c := node(t)
	prefix := uniq(t)
	s, cli := newStore(t, c, prefix, 0)
	ctx := ctxT(t, time.Minute)
	_, pfx := etcdstore.FamilyPrefixes(prefix, "k")
	start, err := cli.Get(ctx, pfx, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	wc := cli.Watch(ctx, pfx, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithRev(start.Header.Revision+1))
	deletions := func(n int) []*clientv3.Event {
		t.Helper()
		var out []*clientv3.Event
		for len(out) < n {
			select {
			case wr := <-wc:
				for _, e := range wr.Events {
					if e.Type == mvccpb.DELETE {
						out = append(out, e)
					}
				}
			case <-ctx.Done():
				t.Fatalf("%d of %d deletions seen", len(out), n)
			}
		}
		return out
	}
	wake := etcdstore.RWWake(s, "k")
	for _, tk := range []string{"a", "b"} {
		if _, err := s.AcquireRead(ctx, "k", tk, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for _, tk := range []string{"a", "b"} {
		if err := s.ReleaseRW(ctx, "k", tk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AcquireWrite(ctx, "k", "w", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireRead(ctx, "k", "w", time.Second); err != nil { // downgrade: deletes the write key
		t.Fatal(err)
	}
	if _, err := s.AcquireWrite(ctx, "k", "w2", time.Second); err == nil {
		t.Fatal("a writer got in beside the downgraded reader")
	}
	if err := s.ReleaseRW(ctx, "k", "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireWrite(ctx, "k", "w2", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseRW(ctx, "k", "w2"); err != nil {
		t.Fatal(err)
	}
	// a's and b's reads, the downgrade's write key, w's read, w2's mark
	// (deleted as w2 gets in) and w2's write
	ev := deletions(6)
	for i, want := range []bool{false, true, true, true, false, true} {
		if got := wake(ctx, ev[i]); got != want {
			t.Errorf("deletion %d (%s): wake %v, want %v", i, ev[i].Kv.Key, got, want)
		}
	}
}
