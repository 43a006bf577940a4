package etcdstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A lock broken through another Store (another session, as the CLI's) is
// reported lost, as taken by another owner, at the holder's next renewal,
// although the holder's session lives on; the next holding's fence is
// greater. Without Break's mark, the holder would see the key free and
// report it gone (ErrExpired): checked here on a second holding whose key
// is deleted directly.
func TestBreakEndsAutoRenewedLeaseAsTaken(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	holder, _ := newStore(t, c, pfx, 2*time.Second)
	breaker, cli := newStore(t, c, pfx, 2*time.Second)
	hc, err := dlock.New(holder)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hc.Close(ctxT(t, 10*time.Second)) })
	ctx := testkit.Ctx(t)
	l, err := hc.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	b, err := dlock.Break(ctx, breaker, "job")
	if err != nil || !b.Held || b.NotALock || b.Fence != l.Fence() || b.Holds != 1 {
		t.Fatalf("Break = %+v, %v; want the holding of fence %d", b, err, l.Fence())
	}
	testkit.Closed(t, l.Done(), 5*time.Second, "loss after the break")
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrTaken) {
		t.Fatalf("Err after Break = %v; want ErrLost, cause ErrTaken", err)
	}
	g, err := breaker.Acquire(ctx, "job", tok(), time.Second)
	if err != nil || g.Fence <= l.Fence() {
		t.Fatalf("Acquire after Break = %+v, %v; want a fence greater than %d", g, err, l.Fence())
	}

	// Control: the same holding's key deleted without Break's mark is lost
	// as gone, not taken.
	l2, err := hc.Lock(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, pfx+"other/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	testkit.Closed(t, l2.Done(), 5*time.Second, "loss after the delete")
	if err := l2.Err(); !errors.Is(err, dlock.ErrExpired) || errors.Is(err, dlock.ErrTaken) {
		t.Fatalf("Err after a plain delete = %v; want ErrExpired, not ErrTaken", err)
	}
}

// A key held through a lock whose name extends it (a/b makes a look held,
// as with etcdctl) is not broken through the shorter name: Break refuses
// and changes nothing.
func TestBreakRefusesKeyHeldThroughLongerName(t *testing.T) {
	c := node(t)
	s, _ := newStore(t, c, uniq(t), 2*time.Second)
	ctx := testkit.Ctx(t)
	holder := tok()
	if _, err := s.Acquire(ctx, "a/b", holder, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Break(ctx, "a"); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("Break(a) with a/b held = %v; want ErrRefused", err)
	}
	if _, err := s.Extend(ctx, "a/b", holder, time.Second); err != nil {
		t.Fatalf("a/b after the refused Break: %v; want still held", err)
	}
}
