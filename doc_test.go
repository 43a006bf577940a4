package dlock_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// TestDocEdgeCases pins doc-comment promises no other test covered:
// TokenDigest's form (and "-" for an empty token), and FenceGate.Admit with
// a nil fn admitting the fence (a lower one is refused afterwards).
func TestDocEdgeCases(t *testing.T) {
	sum := sha256.Sum256([]byte("secret-token"))
	if got, want := dlock.TokenDigest("secret-token"), hex.EncodeToString(sum[:])[:12]; got != want {
		t.Errorf("TokenDigest = %q, want the first 12 hex digits of SHA-256, %q", got, want)
	}
	if got := dlock.TokenDigest(""); got != "-" {
		t.Errorf(`TokenDigest("") = %q, want "-"`, got)
	}
	var g dlock.FenceGate
	if err := g.Admit("r", 5, nil); err != nil {
		t.Fatalf("Admit with a nil fn: %v", err)
	}
	ran := false
	if err := g.Admit("r", 4, func() error { ran = true; return nil }); !errors.Is(err, dlock.ErrStaleFence) || ran {
		t.Errorf("after a nil-fn Admit of 5, fence 4: %v (ran %t), want ErrStaleFence and fn not run", err, ran)
	}
	fnErr := errors.New("write failed")
	if err := g.Admit("r", 6, func() error { return fnErr }); err != fnErr {
		t.Errorf("fn's error = %v, want it returned as is", err)
	}
	if err := g.Admit("r", 5, nil); !errors.Is(err, dlock.ErrStaleFence) {
		t.Errorf("fence 6 counts as admitted although fn failed: 5 got %v, want ErrStaleFence", err)
	}
}

// TestLeaseDocFailures pins the failure cases the Lease comments name: a nil
// ctx is refused with ErrInvalid and leaves the lease held (Release,
// Extend); Extend on a released lease reports ErrNotHeld without I/O.
func TestLeaseDocFailures(t *testing.T) {
	ctx := context.Background()
	locks, err := dlock.New(memstore.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close(ctx)
	l, err := locks.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	if err := l.Release(nilCtx); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("Release(nil) = %v, want ErrInvalid", err)
	}
	if err := l.Extend(nilCtx, time.Minute); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("Extend(nil, …) = %v, want ErrInvalid", err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("after refused nil-ctx calls the lease is not held: %v", err)
	}
	if err := l.Release(ctx); err != nil { // control: the lease was still held
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, dlock.ErrNotHeld) || errors.Is(err, dlock.ErrLost) {
		t.Errorf("Extend after Release = %v, want ErrNotHeld only", err)
	}
}
