package dlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// Do's function context is cancelled, cause ErrLost, when the holding is
// lost (renewals fail past its validity), and Do returns ErrLost; the key
// is free again once the store's expiry passes. Control: with renewals
// working, the same time passes and the context is live.
func TestRWDoCancelsOnLoss(t *testing.T) {
	for _, fail := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			f := newRWFault()
			l := newRWLocks(t, f, dlock.WithAutoRenew(300*time.Millisecond))
			err := l.Do(context.Background(), "k", func(ctx context.Context) error {
				f.failExt.Store(fail)
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-time.After(time.Second):
					return nil
				}
			})
			if !fail {
				if err != nil {
					t.Fatalf("control: Do with working renewals: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, dlock.ErrLost) {
				t.Fatalf("Do whose holding was lost: %v, want ErrLost", err)
			}
			time.Sleep(10 * time.Millisecond) // past the store's expiry
			mustTry(t, l, "k", driver.RWWrite)
		})
	}
}

// A function that panics does not leave the key held: RDo releases the
// read holding as the panic unwinds. Control: while the function runs, a
// writer is kept out.
func TestRWDoReleasesOnPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newRWLocks(t, newRWFault(), dlock.WithTTL(time.Hour))
		func() {
			defer func() { _ = recover() }()
			_ = l.RDo(context.Background(), "k", func(context.Context) error {
				if _, err := l.TryLock(context.Background(), "k"); !errors.Is(err, dlock.ErrNotAcquired) {
					t.Errorf("control: a writer during RDo: %v, want ErrNotAcquired", err)
				}
				panic("boom")
			})
		}()
		mustTry(t, l, "k", driver.RWWrite) // the refused writer's own mark does not keep a writer out
	})
}
