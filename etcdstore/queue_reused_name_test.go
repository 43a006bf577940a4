package etcdstore_test

import (
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A waiter whose predecessor is deleted, and its name taken by a waiter
// queued behind it, before the first waiter watches it, is still granted
// the lock, and the later waiter after it: the name's new key, created
// after ours, is not our predecessor. (The open-loop benchmark's stall: the
// two waiters waited on each other's keys forever.)
func TestQueuedPredecessorNameReusedBehindUs(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	a, cli := newStore(t, c, pfx, 0)
	b, _ := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 30*time.Second)
	ta, tb, tc := tok(), tok(), tok()
	g0, err := a.Acquire(ctx, "q", ta, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// b's waiter stops before it watches its predecessor (a's key),
	// once: the test frees that name and has a reuse it meanwhile.
	paused, resume := make(chan string, 1), make(chan struct{})
	first := true
	etcdstore.SetBeforeWatch(b, func(pred string) {
		if first {
			first = false
			paused <- pred
			<-resume
		}
	})
	type result struct {
		g   driver.Grant
		err error
	}
	bdone, bctx := make(chan result, 1), ctxT(t, 10*time.Second)
	go func() {
		g, err := b.AcquireQueued(bctx, "q", tb, time.Second)
		bdone <- result{g, err}
	}()
	var pred string
	select {
	case pred = <-paused:
	case <-time.After(5 * time.Second):
		t.Fatal("b's waiter never came to watch its predecessor")
	}
	old := getKey(t, cli, pred)
	if old == nil || old.Lease != etcdstore.SessionID(a) || !strings.HasSuffix(pred, "_0") {
		t.Fatalf("b's predecessor %q is %v, want a's holding", pred, old)
	}
	if err := a.Release(ctx, "q", ta); err != nil {
		t.Fatal(err)
	}
	cdone, cctx := make(chan result, 1), ctxT(t, 10*time.Second)
	go func() {
		g, err := a.AcquireQueued(cctx, "q", tc, time.Second)
		cdone <- result{g, err}
	}()
	// The precondition: a's new waiter queued under the freed name.
	waitFor(t, 5*time.Second, "the name reused", func() bool {
		kv := getKey(t, cli, pred)
		return kv != nil && kv.CreateRevision > old.CreateRevision
	})
	close(resume)
	var rb result
	select {
	case rb = <-bdone:
	case <-time.After(3 * time.Second): // a grant takes milliseconds; 3 s is slack for a busy machine
		t.Fatal("stall: b's waiter not granted within 3 s of its predecessor's deletion (it waits for the reused name, whose key waits for it)")
	}
	if rb.err != nil || rb.g.Fence <= g0.Fence {
		t.Fatalf("b's waiter: %+v, %v (a's holding had fence %d)", rb.g, rb.err, g0.Fence)
	}
	select {
	case r := <-cdone:
		t.Fatalf("a's later waiter granted while b holds: %+v, %v", r.g, r.err)
	default:
	}
	if err := b.Release(ctx, "q", tb); err != nil {
		t.Fatal(err)
	}
	rc := <-cdone
	if rc.err != nil || rc.g.Fence <= rb.g.Fence {
		t.Fatalf("a's later waiter: %+v, %v (b's fence %d)", rc.g, rc.err, rb.g.Fence)
	}
	if err := a.Release(ctx, "q", tc); err != nil {
		t.Fatal(err)
	}
}

// getKey returns the key k, or nil if there is none.
func getKey(t *testing.T, cli *clientv3.Client, k string) *mvccpb.KeyValue {
	t.Helper()
	resp, err := cli.Get(ctxT(t, 5*time.Second), k)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	return resp.Kvs[0]
}
