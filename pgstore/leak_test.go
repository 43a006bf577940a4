package pgstore_test

import (
	"testing"
	"time"

	"example.com/dlock/pgstore"
	"go.uber.org/goleak"
)

// TestCloseLeavesNoGoroutine: a store whose listener and sweep run (a
// subscriber, an acquisition) leaves no goroutine behind after Close, and
// the pool it was given still works. Control: before Close the listener and
// sweep goroutines are there.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	pool := newPool(t)
	table := uniqTable(t, pool)
	if err := pool.Ping(ctx(t)); err != nil { // the pool's own goroutines start now
		t.Fatal(err)
	}
	base := goleak.IgnoreCurrent()
	s, err := pgstore.New(pool, pgstore.Options{Table: table, SweepInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Subscribe(ctx(t), "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx(t), "k", tok(), time.Second); err != nil {
		t.Fatal(err)
	}
	if goleak.Find(base) == nil {
		t.Fatal("no goroutine found while the listener and the sweep run: the check is blind")
	}
	if err := s.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := goleak.Find(base); err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(ctx(t)); err != nil {
		t.Fatalf("the pool after the store's Close: %v", err)
	}
}
