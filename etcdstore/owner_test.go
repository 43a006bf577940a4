package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A holder that lost the lock (its session expired) cannot write through a
// transaction guarded by OwnerCmp; the same write unguarded lands (the
// negative control: the guard is what stops it).
func TestOwnerCmp(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	s1, cli := newStore(t, c, pfx, 0)
	s2, _ := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 20*time.Second)
	a := tok()
	g, err := s1.Acquire(ctx, "o", a, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := s1.OwnerCmp("o", g.Fence)
	if err != nil {
		t.Fatal(err)
	}
	res := pfx + "resource"
	put := func(guarded bool, v string) bool {
		txn := cli.Txn(ctx)
		if guarded {
			txn = txn.If(cmp)
		}
		resp, err := txn.Then(clientv3.OpPut(res, v)).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}
	if !put(true, "by holder") {
		t.Fatal("the holder's guarded write was rejected")
	}
	if _, err := s1.OwnerCmp("o", g.Fence+1); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("OwnerCmp with a wrong fence: %v", err)
	}
	expireHolder(t, ctx, cli, pfx+"o/")
	b := tok()
	if _, err := s2.Acquire(ctx, "o", b, time.Second); err != nil {
		t.Fatalf("new holder: %v", err)
	}
	if put(true, "stale") {
		t.Fatal("the stale holder's guarded write landed")
	}
	if got, _ := cli.Get(ctx, res); string(got.Kvs[0].Value) != "by holder" {
		t.Fatalf("resource = %q", got.Kvs[0].Value)
	}
	if !put(false, "stale, unguarded") { // negative control
		t.Fatal("unguarded write rejected: the control shows nothing")
	}
	if _, err := s1.Extend(ctx, "o", a, time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("extend after the session expired: %v", err)
	}
	if _, err := s1.OwnerCmp("o", g.Fence); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("OwnerCmp after loss: %v", err)
	}
	// The next acquisition of s1 starts a new session.
	if err := s2.Release(ctx, "o", b); err != nil {
		t.Fatal(err)
	}
	if g2, err := s1.Acquire(ctx, "o", a, time.Second); err != nil || g2.Fence <= g.Fence {
		t.Fatalf("acquire on a new session: %+v, %v", g2, err)
	}
}

// A stale release (its compare-and-set read before a newer holding of the
// same session and token was taken) does not delete the newer holding
// (etcd #22082); a plain delete, as concurrency.Mutex.Unlock sends, does.
func TestStaleReleaseGuard(t *testing.T) {
	s, cli := newStore(t, node(t), uniq(t), 0)
	ctx := ctxT(t, 20*time.Second)
	a := tok()
	if _, err := s.Acquire(ctx, "r", a, time.Second); err != nil {
		t.Fatal(err)
	}
	old, err := cli.Get(ctx, s.Prefix()+"r/", clientv3.WithFirstCreate()...)
	if err != nil || len(old.Kvs) != 1 {
		t.Fatal(old, err)
	}
	k, oldMod := string(old.Kvs[0].Key), old.Kvs[0].ModRevision
	if err := s.Release(ctx, "r", a); err != nil {
		t.Fatal(err)
	}
	g, err := s.Acquire(ctx, "r", a, time.Second) // same session, same token: same key
	if err != nil {
		t.Fatal(err)
	}
	// The first release's transaction, delivered again late.
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", oldMod)).Then(clientv3.OpDelete(k)).Commit()
	if err != nil || resp.Succeeded {
		t.Fatalf("stale guarded release applied: %v %v", resp, err)
	}
	if info, _ := s.Inspect(ctx, "r"); !info.Held || info.Fence != g.Fence {
		t.Fatalf("the newer holding is gone: %+v", info)
	}
	if del, err := cli.Delete(ctx, k); err != nil || del.Deleted != 1 { // negative control
		t.Fatalf("unguarded delete: %v %v", del, err)
	}
}

// expireHolder revokes the lease of the holder of the etcd prefix pfx, as
// the server does when the holder's session expires.
func expireHolder(t *testing.T, ctx context.Context, cli *clientv3.Client, pfx string) {
	t.Helper()
	kv, err := cli.Get(ctx, pfx, clientv3.WithFirstCreate()...)
	if err != nil || len(kv.Kvs) != 1 {
		t.Fatal(kv, err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(kv.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
}
