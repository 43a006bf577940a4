package dlock_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/memstore"
)

// Break ends an auto-renewed lease of another Client: the lease reports the
// loss as taken at its next renewal, and the next holding's fence is
// greater. Bad input and a store without driver.Breaker (faultStore hides
// memstore's; unwrapStore lets it through: the control) are refused and
// leave the key held.
func TestBreakEndsLeaseAsTaken(t *testing.T) {
	ctx := testCtx(t)
	mem := memstore.New(nil)
	fs := &faultStore{Mutex: mem}
	c, err := dlock.New(unwrapStore{fs})
	if err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, c)
	l := mustLock(t, c, ctx, "k", dlock.WithAutoRenew(150*time.Millisecond))
	if _, err := dlock.Break(ctx, unwrapStore{fs}, ""); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("Break of an empty key = %v; want ErrInvalid", err)
	}
	if _, err := dlock.Break(ctx, fs, "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Break on a store without driver.Breaker = %v; want errors.ErrUnsupported", err)
	}
	if info, err := mem.Inspect(ctx, "k"); err != nil || !info.Held {
		t.Fatalf("refused Breaks freed the key: %+v, %v", info, err)
	}
	b, err := dlock.Break(ctx, unwrapStore{fs}, "k")
	if err != nil || !b.Held || b.Fence != l.Fence() || b.Token != l.Token() {
		t.Fatalf("Break = %+v, %v; want the lease's holding, fence %d", b, err, l.Fence())
	}
	within(t, l.Done(), 2*time.Second, "the loss after Break")
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrTaken) {
		t.Fatalf("Err = %v; want ErrLost with cause ErrTaken", err)
	}
	if next := mustLock(t, c, ctx, "k"); next.Fence() <= l.Fence() {
		t.Fatalf("fence after Break = %d; want greater than %d", next.Fence(), l.Fence())
	}
}
