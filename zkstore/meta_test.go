package zkstore_test

import (
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/internal/testkit/clienttest"
)

// A holding's metadata is in its node's data: another Store (another
// session, which knows no token) reads it back through Inspect and List,
// and re-entries, partial releases and the queue keep it.
func TestMetaIsKeptInTheNodeDataAndReadByAnyStore(t *testing.T) {
	addrs := server(t).Addrs()
	root := uniq(t)
	s, other := dial(t, root, 10*time.Second, addrs...), dial(t, root, 10*time.Second, addrs...)
	cl := clienttest.NewClient(t, s, dlock.WithMeta("host=a pid=1 cmd=job"))
	ctx := dlock.ContextWithOwner(ctxT(t, 60*time.Second), dlock.NewOwner())

	l1 := clienttest.MustLock(t, cl, ctx, "k")
	l2 := clienttest.MustLock(t, cl, ctx, "k", dlock.WithMeta("second"))
	for _, st := range []driver.Inspector{s, other} {
		info, err := st.Inspect(ctx, "k")
		if err != nil || info.Meta != "host=a pid=1 cmd=job" || info.Holds != 2 || info.Foreign {
			t.Fatalf("Inspect = %+v, %v; want the first holding's metadata", info, err)
		}
		if strings.Contains(info.Meta, l1.Token()) {
			t.Fatal("metadata contains the token")
		}
	}
	clienttest.Release(t, l2) // a partial release rewrites the data
	var listed driver.Info
	if err := other.List(ctx, "k", func(_ string, i driver.Info) bool { listed = i; return true }); err != nil || listed.Meta != "host=a pid=1 cmd=job" {
		t.Fatalf("List after a partial release: %+v, %v", listed, err)
	}

	// A waiter queued in ZooKeeper (another client, its own metadata) shows
	// its own once it holds the key.
	c2 := clienttest.NewClient(t, other, dlock.WithMeta("waiter"))
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := c2.Lock(ctx, "k")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	testkit.WaitFor(t, 10*time.Second, "the waiter queued", func() bool { n, _ := s.Waiters(ctx, "k"); return n == 1 })
	clienttest.Release(t, l1)
	l3 := <-got
	if info, err := s.Inspect(ctx, "k"); err != nil || info.Meta != "waiter" {
		t.Fatalf("Inspect after the queue = %+v, %v", info, err)
	}
	clienttest.Release(t, l3)

	// Without metadata the data is as before, and Meta is empty.
	l4 := clienttest.MustLock(t, c2, ctx, "plain", dlock.WithMeta(""))
	if info, err := other.Inspect(ctx, "plain"); err != nil || info.Meta != "" || !info.Held {
		t.Fatalf("no metadata: Inspect = %+v, %v", info, err)
	}
	clienttest.Release(t, l4)
}

// A transfer (the Client's local handoff) keeps the metadata in the data.
func TestMetaIsKeptByATransfer(t *testing.T) {
	s := dial(t, uniq(t), 10*time.Second, server(t).Addrs()...)
	ctx := ctxT(t, 30*time.Second)
	from, to := tok(), tok()
	if _, err := s.Acquire(driver.WithMeta(ctx, "m"), "t", from, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transfer(ctx, "t", from, to, time.Minute); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Inspect(ctx, "t"); err != nil || info.Meta != "m" || info.Token != to {
		t.Fatalf("after the transfer: Inspect = %+v, %v", info, err)
	}
}
