package etcdstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/stepcall"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// resourceOf is a resource key for the test with prefix pfx, outside it.
func resourceOf(pfx string) string { return strings.TrimSuffix(pfx, "/") + "-stock" }

// getValue reads res with the admin client.
func getValue(t *testing.T, cli *clientv3.Client, res string) string {
	t.Helper()
	resp, err := cli.Get(ctxT(t, 10*time.Second), res)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get %q: %v, %v", res, resp, err)
	}
	return string(resp.Kvs[0].Value)
}

// A holder that lost the key (its session expired, another store took the
// key) commits through the Client: the store still has the holding cached
// and sends its guarded transaction, which etcd refuses: nothing is
// written, and the new holder keeps the key. Negative control: the same
// operations without the ownership compare land.
func TestStaleCommitWritesNothing(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	sa, cli := newStore(t, c, pfx, 0)
	sb, _ := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 30*time.Second)
	res := resourceOf(pfx)
	if _, err := cli.Put(ctx, res, "10"); err != nil {
		t.Fatal(err)
	}
	dc, err := dlock.New(sa)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, dc)
	t.Cleanup(func() { _ = dc.Close(ctx) })
	l, err := dc.Lock(ctx, "k", dlock.WithRead(res))
	if err != nil {
		t.Fatal(err)
	}
	if v, found := l.Value(); !l.ValueRead() || !found || v != "10" {
		t.Fatalf("WithRead gave %q %v (read %v), want 10", v, found, l.ValueRead())
	}
	held, err := cli.Get(ctx, pfx+"k/", clientv3.WithFirstCreate()...)
	if err != nil || len(held.Kvs) != 1 {
		t.Fatal(held, err)
	}
	k, mod := string(held.Kvs[0].Key), held.Kvs[0].ModRevision
	expireHolder(t, ctx, cli, pfx+"k/")
	b := tok()
	if _, err := sb.Acquire(ctx, "k", b, time.Second); err != nil {
		t.Fatalf("the new holder: %v", err)
	}
	err = l.Commit(ctx, "9")
	if !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("stale Commit: %v, want ErrLost", err)
	}
	if got := getValue(t, cli, res); got != "10" {
		t.Fatalf("a stale Commit wrote %q", got)
	}
	if info, err := sb.Inspect(ctx, "k"); err != nil || !info.Held || info.Token != b {
		t.Fatalf("the new holding: %+v, %v", info, err)
	}
	// Negative control: the stale holder's operations, guarded as the store
	// guards them, are refused; without the guard they land.
	ops := []clientv3.Op{clientv3.OpDelete(k), clientv3.OpPut(res, "9")}
	if resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", mod)).Then(ops...).Commit(); err != nil || resp.Succeeded {
		t.Fatalf("the guarded stale write: %v, %v", resp, err)
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	if got := getValue(t, cli, res); got != "9" {
		t.Fatalf("control: the unguarded write did not land (%q)", got)
	}
}

// A resource inside the lock prefix is refused with ErrInvalid, before
// anything changes: the lock stays as it was and the key is not written.
func TestApplyRefusesResourceInLockPrefix(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	s, cli := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 30*time.Second)
	a := tok()
	for _, res := range []string{pfx + "k/x", pfx + "other"} {
		if _, _, err := stepcall.AcquireRead(ctx, s, "k", a, time.Second, res); !errors.Is(err, driver.ErrInvalid) {
			t.Fatalf("AcquireRead of %q: %v, want ErrInvalid", res, err)
		}
		if _, _, err := s.AcquireQueuedRead(ctx, "k", a, time.Second, res); !errors.Is(err, driver.ErrInvalid) {
			t.Fatalf("AcquireQueuedRead of %q: %v, want ErrInvalid", res, err)
		}
	}
	if info, err := s.Inspect(ctx, "k"); err != nil || info.Held {
		t.Fatalf("a refused acquire left %+v, %v", info, err)
	}
	if _, err := s.Acquire(ctx, "k", a, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := stepcall.ReleaseWrite(ctx, s, "k", a, pfx+"k/evil", "x"); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("ReleaseWrite into the lock prefix: %v, want ErrInvalid", err)
	}
	if _, _, err := stepcall.TransferWrite(ctx, s, "k", a, tok(), time.Second, pfx+"z", "x", ""); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("TransferWrite into the store prefix: %v, want ErrInvalid", err)
	}
	if info, err := s.Inspect(ctx, "k"); err != nil || !info.Held || info.Token != a {
		t.Fatalf("a refused release or transfer changed the holding: %+v, %v", info, err)
	}
	if resp, err := cli.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 1 {
		t.Fatalf("keys under the prefix: %v, %v; want only the holding", resp, err)
	}
	// Without a prefix, only the lock's own prefix is refused.
	bare, _ := newStore(t, c, "", 0)
	name := strings.TrimSuffix(pfx, "/") + "-bare"
	if _, _, err := stepcall.AcquireRead(ctx, bare, name, tok(), time.Second, name+"/x"); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("bare store, resource in the lock's prefix: %v, want ErrInvalid", err)
	}
	b := tok()
	if _, v, err := stepcall.AcquireRead(ctx, bare, name, b, time.Second, name+"-data"); err != nil || v.Found {
		t.Fatalf("bare store, a resource beside the lock: %+v, %v", v, err)
	}
	if err := bare.Release(ctx, name, b); err != nil {
		t.Fatal(err)
	}
}

// A WithRead Lock on another Client waits in etcd's queue (its key is
// counted as a waiter) and gets, with the key, the value the holder
// committed; a Commit then lands for the new holder. Before etcdstore was a
// driver.QueueReader, such a Lock polled with Acquire: no waiter in etcd.
func TestWithReadLockWaitsInQueue(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	sa, cli := newStore(t, c, pfx, 0)
	sb, _ := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 60*time.Second)
	res := resourceOf(pfx)
	if _, err := cli.Put(ctx, res, "100"); err != nil {
		t.Fatal(err)
	}
	da, err := dlock.New(sa)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, da)
	db, err := dlock.New(sb)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, db)
	t.Cleanup(func() { _ = da.Close(ctx); _ = db.Close(ctx) })
	l1, err := da.Lock(ctx, "k", dlock.WithRead(res))
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		l   *dlock.Lease
		err error
	}
	done := make(chan got, 1)
	go func() {
		l, err := db.Lock(ctx, "k", dlock.WithRead(res), dlock.WithWait(30*time.Second))
		done <- got{l, err}
	}()
	deadline, tick := time.Now().Add(10*time.Second), time.NewTicker(5*time.Millisecond)
	defer tick.Stop()
	for n := 0; n != 1; <-tick.C {
		if n, err = sa.Waiters(ctx, "k"); err != nil || time.Now().After(deadline) {
			t.Fatalf("waiters in etcd's queue: %d, %v; want 1 within 10 s", n, err)
		}
	}
	if err := l1.Commit(ctx, "99"); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if v, found := r.l.Value(); !r.l.ValueRead() || !found || v != "99" || r.l.Fence() <= l1.Fence() {
		t.Fatalf("the queued Lock read %q %v (read %v), fence %d after %d; want 99 and a greater fence", v, found, r.l.ValueRead(), r.l.Fence(), l1.Fence())
	}
	if err := r.l.Commit(ctx, "98"); err != nil {
		t.Fatal(err)
	}
	if got := getValue(t, cli, res); got != "98" {
		t.Fatalf("after two commits the resource is %q, want 98", got)
	}
}

// A step's Read returns the value right after its Write: the written value
// when both name one key, else the other key's value, read in the same
// transaction; a Transfer's read is the recipient's.
func TestApplyReadsAfterWrite(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	s, cli := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 30*time.Second)
	res, other := resourceOf(pfx), resourceOf(pfx)+"-other"
	if _, err := cli.Put(ctx, other, "o"); err != nil {
		t.Fatal(err)
	}
	a, b := tok(), tok()
	steps := []struct {
		step driver.Step
		want driver.Value
	}{
		{driver.Step{Action: driver.Acquire, Key: "k", Token: a, TTL: time.Second, Read: res}, driver.Value{}},
		{driver.Step{Action: driver.Transfer, Key: "k", Token: a, To: b, TTL: time.Second, Write: &driver.Write{Resource: res, Value: "1"}, Read: other}, driver.Value{Data: "o", Found: true}},
		{driver.Step{Action: driver.Release, Key: "k", Token: b, Write: &driver.Write{Resource: res, Value: "2"}, Read: res}, driver.Value{Data: "2", Found: true}},
		{driver.Step{Action: driver.Acquire, Key: "k", Token: a, TTL: time.Second, Read: res}, driver.Value{Data: "2", Found: true}},
		{driver.Step{Action: driver.Release, Key: "k", Token: a, Write: &driver.Write{Resource: other, Value: "3"}, Read: res}, driver.Value{Data: "2", Found: true}},
	}
	for i, st := range steps {
		if _, v, err := s.Apply(ctx, st.step); err != nil || v != st.want {
			t.Fatalf("step %d (action %d): %+v, %v; want %+v", i, st.step.Action, v, err, st.want)
		}
	}
	if got := getValue(t, cli, other); got != "3" {
		t.Fatalf("other = %q, want 3", got)
	}
}
