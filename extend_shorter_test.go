package dlock_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/testkit/clienttest"
)

// An Extend shorter than the lease moves the lease's validity back to
// the expiry it set in the store, so no other client acquires while the
// holder believes it holds the lock. (Was TestS1ExtendShorterMovesValidityBack,
// review item S1, on a real Redis.)
func TestExtendShorterMovesValidityBack(t *testing.T) {
	holder, fs := newClient(t)
	other := newClientOn(t, fs)
	ctx := testCtx(t)
	l := mustLock(t, holder, ctx, "s1", dlock.WithTTL(10*time.Second))
	const short = 50 * time.Millisecond
	extStart := time.Now()
	if err := l.Extend(ctx, short); err != nil {
		t.Fatalf("Extend(%v): %v", short, err)
	}
	if got := l.ValidUntil().Sub(extStart); got > short {
		t.Fatalf("after Extend(%v) the lease is valid for %v more", short, got)
	}
	overlaps, acquired := clienttest.OverlapWatch(t, other, l, "s1", 2*time.Second)
	if overlaps != 0 {
		t.Fatalf("%d overlapping holders after Extend(%v)", overlaps, short)
	}
	if !acquired { // negative control: the key did expire in the store
		t.Fatalf("key still held 2s after Extend(%v)", short)
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrExpired) {
		t.Fatalf("holder Err = %v, want ErrLost (ErrExpired)", err)
	}
}
