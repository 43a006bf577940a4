package zkstore_test

import (
	"testing"
	"time"

	"example.com/dlock/driver"
)

// TestTransferFenceSurvivesReentry: a transfer's fence (the zxid of its
// write) is what every store's Inspect reports, also after the new holder
// re-enters (a later write to the node) and releases one hold; the node
// keeps its place and name; and a transfer is one write on the node, so a
// waiter queued behind stays behind.
func TestTransferFenceSurvivesReentry(t *testing.T) {
	e := server(t)
	root := uniq(t)
	s := dial(t, root, 4*time.Second, e.Addrs()...)
	other := dial(t, root, 4*time.Second, e.Addrs()...)
	ctx := ctxT(t, 20*time.Second)
	a, b := tok(), tok()
	g1, err := s.Acquire(ctx, "k", a, 0)
	if err != nil {
		t.Fatal(err)
	}
	adm := admin(t)
	before, _, err := adm.Children(root + "/k")
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { _, err := other.AcquireQueued(ctx, "k", tok(), 0); waited <- err }()
	waitWaiters(t, other, "k", 1)
	g2, err := s.Transfer(ctx, "k", a, b, 0)
	if err != nil || g2.Fence <= g1.Fence || g2.Holds != 1 {
		t.Fatalf("Transfer = %+v, %v; want a fence above %d", g2, err, g1.Fence)
	}
	for _, step := range []func() error{
		func() error { return nil },
		func() error { _, err := s.Acquire(ctx, "k", b, 0); return err },
		func() error { return s.Release(ctx, "k", b) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
		info, err := other.Inspect(ctx, "k")
		if err != nil || !info.Held || info.Fence != g2.Fence {
			t.Fatalf("Inspect from another store = %+v, %v; want held with fence %d", info, err, g2.Fence)
		}
	}
	after, _, _ := adm.Children(root + "/k")
	if len(after) != 2 || after[0] != before[0] && after[1] != before[0] {
		t.Fatalf("children before %v, after %v: the holder's node should stay, with the waiter's", before, after)
	}
	select {
	case err := <-waited:
		t.Fatalf("the queued waiter got through a transfer: %v", err)
	default:
	}
	if err := s.Release(ctx, "k", b); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("waiter after the release: %v", err)
	}
}

// TestQueuedHolderFenceAboveEarlierTransfer: a waiter queued (node created)
// before the holder handed the lock on locally gets, once it holds, a fence
// above the transfer's, though its node's czxid is below it. Control: the
// waiter's czxid, the fence the store gave before grantFence, is not above
// the transfer's fence (fences would go back: the CLI demo's fenced writes
// were refused).
func TestQueuedHolderFenceAboveEarlierTransfer(t *testing.T) {
	e := server(t)
	root := uniq(t)
	s := dial(t, root, 4*time.Second, e.Addrs()...)
	other := dial(t, root, 4*time.Second, e.Addrs()...)
	ctx := ctxT(t, 20*time.Second)
	a, b := tok(), tok()
	g1, err := s.Acquire(ctx, "k", a, 0)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		g   driver.Grant
		err error
	}
	waited := make(chan result, 1)
	go func() { g, err := other.AcquireQueued(ctx, "k", tok(), 0); waited <- result{g, err} }()
	waitWaiters(t, other, "k", 1)
	g2, err := s.Transfer(ctx, "k", a, b, 0)
	if err != nil || g2.Fence <= g1.Fence {
		t.Fatalf("Transfer = %+v, %v; want a fence above %d", g2, err, g1.Fence)
	}
	if err := s.Release(ctx, "k", b); err != nil {
		t.Fatal(err)
	}
	r := <-waited
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	if r.g.Fence <= g2.Fence {
		t.Fatalf("waiter's fence %d is not above the transfer's %d: fences went back", r.g.Fence, g2.Fence)
	}
	now, _, err := admin(t).Children(root + "/k")
	if err != nil || len(now) != 1 {
		t.Fatalf("children after the grant %v, %v; want the waiter's node only", now, err)
	}
	_, st, err := admin(t).Get(root + "/k/" + now[0])
	if err != nil {
		t.Fatal(err)
	}
	waiterCzxid := st.Czxid
	if waiterCzxid == 0 || uint64(waiterCzxid) > g2.Fence {
		t.Fatalf("control: the waiter's czxid %d should be below the transfer's fence %d (else this test shows nothing)", waiterCzxid, g2.Fence)
	}
	info, err := other.Inspect(ctx, "k")
	if err != nil || info.Fence != r.g.Fence {
		t.Fatalf("the holder's own Inspect = %+v, %v; want its grant's fence %d", info, err, r.g.Fence)
	}
}
