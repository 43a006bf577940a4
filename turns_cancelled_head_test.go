package dlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// hangKey marks the context of the waiter whose attempts after its first
// two never answer (hangStore).
type hangKey struct{}

// hangStore is a notifying store (through unwrapStore) on which the
// attempts of a marked waiter after its first two hang until their
// context ends, acquiring nothing.
type hangStore struct{ unwrapStore }

func (h hangStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if n, ok := ctx.Value(hangKey{}).(*int); ok {
		if *n++; *n > 2 {
			<-ctx.Done()
			return driver.Grant{}, ctx.Err()
		}
	}
	return h.unwrapStore.Acquire(ctx, key, token, ttl)
}

// TestCancelledHeadHandsTheTurnOn: two waiters of one key in one process;
// the first, woken by the release, never gets an answer and its wait bound
// ends it; it hands its turn on, so the second is granted then, not at the
// holder's expiry a minute later. Control: with the hand-on broken, the
// second sleeps until that expiry.
func TestCancelledHeadHandsTheTurnOn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		broken bool
	}{
		{"hand-on", false},
		{"no hand-on (control)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.broken {
				dlock.BreakTurnsHandOn(t)
			}
			synctest.Test(t, func(t *testing.T) {
				got := secondGrant(t)
				t.Logf("second waiter granted %v after the release", got)
				// The first's wait bound, exact on the bubble's clock;
				// else the holder's expiry (a minute, plus jitter).
				prompt := got == 50*time.Millisecond
				if prompt == tc.broken {
					t.Fatalf("second waiter granted %v after the release; want 50ms with the hand-on, a minute or more without", got)
				}
				if tc.broken && got < time.Minute {
					t.Fatalf("control: second waiter granted %v after the release, want a minute or more", got)
				}
			})
		})
	}
}

// secondGrant queues a hanging first waiter (50 ms wait bound) and a second
// behind a holder, releases, and returns when the second got the key.
func secondGrant(t *testing.T) time.Duration {
	fs := &faultStore{Mutex: memstore.New(nil)}
	s := hangStore{unwrapStore{fs}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // the bubble's clock: past the control's minute
	defer cancel()
	l := mustLock(t, newClientOn(t, s), ctx, "k", dlock.WithTTL(time.Minute))
	first, second := newClientOn(t, s), newClientOn(t, s)
	var n int
	firstDone := make(chan error, 1)
	go func() {
		_, err := first.Lock(context.WithValue(ctx, hangKey{}, &n), "k", dlock.WithWait(50*time.Millisecond))
		firstDone <- err
	}()
	synctest.Wait() // the first has subscribed and sleeps
	got := make(chan time.Time, 1)
	go func() {
		l2, err := second.Lock(ctx, "k", dlock.WithTTL(time.Minute))
		if err != nil {
			t.Error(err)
			got <- time.Time{}
			return
		}
		got <- time.Now()
		_ = l2.Release(ctx)
	}()
	synctest.Wait()
	start := time.Now()
	release(t, l)
	if err := <-firstDone; !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("first waiter: %v, want ErrNotAcquired", err)
	}
	return (<-got).Sub(start)
}
