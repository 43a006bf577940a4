package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"example.com/dlock"
)

// TestS2ShortReentryKeepsTheOuterHolding is issue 13's S2 as seen: a nested
// Do with a 50 ms lease inside a Do with the default 30 s lease. The inner
// one's re-entry used to reset the key's expiry to 50 ms, and another client
// acquired 100 ms later while the outer function still ran. Now the
// re-entry never shortens the holding: the other client stays out.
func TestS2ShortReentryKeepsTheOuterHolding(t *testing.T) {
	_, rdb := newRedis(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := testCtx(t)
	overlaps := 0
	err := a.Do(ctx, "s2", func(fctx context.Context) error {
		err := a.Do(fctx, "s2", func(context.Context) error { return nil }, dlock.WithTTL(50*time.Millisecond))
		if err != nil {
			return err
		}
		time.Sleep(150 * time.Millisecond) // the short lease running out is the point
		l, err := b.TryLock(ctx, "s2")
		if err == nil {
			overlaps++
			_ = l.Release(ctx)
		} else if !errors.Is(err, dlock.ErrNotAcquired) {
			return fmt.Errorf("other client: %w", err)
		}
		return fctx.Err()
	})
	if err != nil || overlaps != 0 {
		t.Fatalf("outer Do = %v; %d overlapping holders after a short nested Do", err, overlaps)
	}
	// Control: once the outer Do has released, the other client gets it.
	l, err := b.TryLock(ctx, "s2")
	if err != nil {
		t.Fatalf("after the outer Do: %v", err)
	}
	_ = l.Release(ctx)
}
