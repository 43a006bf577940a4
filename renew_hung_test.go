package dlock_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/internal/testkit/clienttest"
	"example.com/dlock/memstore"
)

// A renewal call that hangs holds up only its own lease. The long
// lease's renewal hangs for half its 1 s period, longer than the short
// lease's whole validity; the short lease, taken by the same Client while
// that call hangs, is renewed on time throughout, and nobody else can take
// its key.
//
// Was TestL4HungRenewalDoesNotStarveOtherLeases (review item L4), on a
// real Redis.
func TestHungRenewalDoesNotStarveOtherLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New(nil)
		hook := clienttest.NewExtendHook(st, "l4-long")
		holder := newClientOn(t, hook)
		other := newClientOn(t, st)
		ctx := testCtx(t)
		long := mustLock(t, holder, ctx, "l4-long", dlock.WithAutoRenew(3*time.Second))
		within(t, hook.Started, 3*time.Second, "the long lease's renewal")
		hangStart := time.Now()
		const lease = 300 * time.Millisecond
		short := mustLock(t, holder, ctx, "l4-short", dlock.WithAutoRenew(lease))
		// Watch the short lease's key from another client until well after the
		// hung call ended: two of its TTLs.
		within(t, hook.Ended, 3*time.Second, "the hung renewal's timeout")
		hang := time.Since(hangStart)
		overlaps, tries := 0, 0
		for until := time.Now().Add(2 * lease); time.Now().Before(until); tries++ {
			if l, err := other.TryLock(ctx, "l4-short"); err == nil {
				overlaps++
				release(t, l)
			} else if !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("TryLock: %v", err)
			}
			<-time.After(10 * time.Millisecond)
		}
		// Negative control: the call did hang for longer than the short lease.
		if hang < lease {
			t.Fatalf("the long lease's renewal hung only %v", hang)
		}
		if err := short.Err(); err != nil {
			t.Fatalf("short lease lost while another lease's renewal hung for %v: %v", hang, err)
		}
		if overlaps != 0 {
			t.Fatalf("%d of %d tries acquired the short lease's key while it was held", overlaps, tries)
		}
		release(t, short)
		_ = long.Release(ctx) // its renewals still hang; it may be lost by now
	})
}
