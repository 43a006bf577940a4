package dlock_test

import (
	"context"
	"testing"

	"example.com/dlock"
)

// Do's function gets its lease (and so the fence) from its context; a
// nested Do on the same key gets the re-entrant lease; a derived context
// (ContextWithOwner included) still carries it; other contexts carry none.
//
// Was TestA1LeaseFromContext (review item A1), on a real Redis.
func TestLeaseFromContextInDo(t *testing.T) {
	c, _ := newClient(t)
	ctx := testCtx(t)
	if l, ok := dlock.LeaseFromContext(ctx); ok || l != nil {
		t.Fatalf("LeaseFromContext(plain) = %v, %v", l, ok)
	}
	err := c.Do(ctx, "A1", func(ctx context.Context) error {
		outer, ok := dlock.LeaseFromContext(ctx)
		if !ok || outer.Key() != "A1" || outer.Fence() == 0 || outer.Err() != nil {
			t.Errorf("outer lease = %v, %v", outer, ok)
			return nil
		}
		derived := dlock.ContextWithOwner(ctx, dlock.NewOwner())
		if l, _ := dlock.LeaseFromContext(derived); l != outer {
			t.Errorf("lease through ContextWithOwner = %v, want the Do's", l)
		}
		return c.Do(ctx, "A1", func(ctx context.Context) error {
			inner, _ := dlock.LeaseFromContext(ctx)
			if inner == outer || inner.Holds() != 2 || inner.Fence() != outer.Fence() {
				t.Errorf("inner lease holds %d fence %d, want 2 and %d", inner.Holds(), inner.Fence(), outer.Fence())
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}
