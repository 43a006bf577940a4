package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

func TestTransferIsANewHolding(t *testing.T) {
	s := memstore.New(nil)
	ctx := context.Background()
	if _, err := s.Transfer(ctx, "k", "a", "b", time.Minute); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("transfer of a free key = %v, want ErrNotHeld", err)
	}
	g1, err := s.Acquire(ctx, "k", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "k", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transfer(ctx, "k", "a", "b", time.Minute); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("transfer of a re-entered lock = %v, want ErrInvalid", err)
	}
	if err := s.Release(ctx, "k", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transfer(ctx, "k", "x", "b", time.Minute); !errors.Is(err, dlock.ErrTaken) {
		t.Fatalf("transfer by a non-holder = %v, want ErrTaken", err)
	}
	g2, err := s.Transfer(ctx, "k", "a", "b", time.Minute)
	if err != nil || g2.Fence <= g1.Fence || g2.Holds != 1 {
		t.Fatalf("transfer = %+v, %v; want a fence above %d and one hold", g2, err, g1.Fence)
	}
	if info, _ := s.Inspect(ctx, "k"); info.Token != "b" {
		t.Fatalf("owner after transfer: %+v", info)
	}
	if err := s.Release(ctx, "k", "a"); !errors.Is(err, dlock.ErrTaken) {
		t.Fatalf("old holder's release = %v, want ErrTaken", err)
	}
}
