package etcdstore_test

import (
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/internal/testkit/clienttest"
)

// A holding's metadata is in its key's value: another Store (another
// process, which knows no token) reads it back through Inspect and List,
// and re-entries, partial releases and the queue keep it.
func TestMetaIsKeptInTheValueAndReadByAnyStore(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	s, _ := newStore(t, c, pfx, 5*time.Second)
	other, _ := newStore(t, c, pfx, 5*time.Second)
	cl, err := dlock.New(s, dlock.WithMeta("host=a pid=1 cmd=job"))
	if err != nil {
		t.Fatal(err)
	}
	testkit.CloseOnCleanup(t, cl)
	ctx := dlock.ContextWithOwner(testkit.Ctx(t), dlock.NewOwner())

	l1 := clienttest.MustLock(t, cl, ctx, "k")
	l2 := clienttest.MustLock(t, cl, ctx, "k", dlock.WithMeta("second"))
	for _, st := range []*etcdstore.Store{s, other} {
		info, err := st.Inspect(ctx, "k")
		if err != nil || info.Meta != "host=a pid=1 cmd=job" || info.Holds != 2 {
			t.Fatalf("Inspect = %+v, %v; want the first holding's metadata", info, err)
		}
		if strings.Contains(info.Meta, l1.Token()) {
			t.Fatal("metadata contains the token")
		}
	}
	clienttest.Release(t, l2) // a partial release rewrites the value
	var listed driver.Info
	if err := other.List(ctx, "k", func(_ string, i driver.Info) bool { listed = i; return true }); err != nil || listed.Meta != "host=a pid=1 cmd=job" {
		t.Fatalf("List after a partial release: %+v, %v", listed, err)
	}

	// A waiter queued in etcd (another client, its own metadata) shows its
	// own once it holds the key.
	c2, err := dlock.New(other, dlock.WithMeta("waiter"))
	if err != nil {
		t.Fatal(err)
	}
	testkit.CloseOnCleanup(t, c2)
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := c2.Lock(testkit.Ctx(t), "k")
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

	// Without metadata the value is as before, and Meta is empty.
	l4 := clienttest.MustLock(t, c2, ctx, "plain", dlock.WithMeta(""))
	if info, err := other.Inspect(ctx, "plain"); err != nil || info.Meta != "" || !info.Held {
		t.Fatalf("no metadata: Inspect = %+v, %v", info, err)
	}
	clienttest.Release(t, l4)
}

// A transfer (the Client's local handoff) keeps the metadata in the value.
func TestMetaIsKeptByATransfer(t *testing.T) {
	s, _ := newStore(t, node(t), uniq(t), 5*time.Second)
	ctx := testkit.Ctx(t)
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
