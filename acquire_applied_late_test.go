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

// lateAcquire holds back one Acquire's request: the call returns its
// context's error when the context ends, and the store applies the request
// only when the test lets it go (a request still on its way to the server
// when the caller gave up, as seen on MariaDB under load).
type lateAcquire struct {
	*memstore.Store
	held chan struct{} // non-nil: the next Acquire waits for it to close
	done chan struct{} // closed once the held Acquire is applied
	ttl  time.Duration
}

func (s *lateAcquire) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	held := s.held
	if held == nil {
		return s.Store.Acquire(ctx, key, token, ttl)
	}
	s.held = nil
	go func() {
		<-held
		_, _ = s.Store.Acquire(context.Background(), key, token, s.ttl)
		close(s.done)
	}()
	<-ctx.Done()
	return driver.Grant{}, ctx.Err()
}

// An owner's Lock gives up with its request still on the way; the give-back
// finds nothing to release; then the store applies the request, before the
// owner's next Lock (which re-enters on top of the late hold: holds 2) or
// while that holding lives. Once the owner releases, the key must be free:
// the grant's hold count reveals the late hold, or the give-back after the
// owner's last holding tries it once more. Before the fix it stayed held
// for the next lease's TTL (found by the model case on MariaDB, seed
// 28139896266923). Control (BreakLateHolds): another client is refused.
func TestAcquireAppliedLateIsGivenBack(t *testing.T) {
	for _, broken := range []bool{false, true} {
		for _, during := range []bool{false, true} {
			name := map[bool]string{false: "fixed", true: "control"}[broken] + map[bool]string{false: "/before the next grant", true: "/during the next holding"}[during]
			t.Run(name, func(t *testing.T) {
				if broken {
					dlock.BreakLateHolds(t)
				}
				synctest.Test(t, func(t *testing.T) {
					free := lateAcquireSchedule(t, during)
					if !broken && free != nil {
						t.Fatalf("after the owner's last release and the give-back, another client's TryLock: %v; want the key free", free)
					}
					if broken && free == nil {
						t.Fatal("control: the key is free without counting late holds, so the test shows nothing")
					}
				})
			})
		}
	}
}

// lateAcquireSchedule runs the schedule above and returns another client's
// TryLock error once the owner has released and the give-back has run.
func lateAcquireSchedule(t *testing.T, during bool) error {
	store := &lateAcquire{Store: memstore.New(nil), held: make(chan struct{}), done: make(chan struct{}), ttl: 20 * time.Second}
	held := store.held
	owner, other := newClientOnStore(t, store), newClientOnStore(t, store)
	ctx := dlock.ContextWithOwner(context.Background(), dlock.NewOwner())
	wctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	_, err := owner.Lock(wctx, "k")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with its request held back: %v; want the wait's deadline", err)
	}
	synctest.Wait() // the give-back has found nothing to release
	apply := func() {
		close(held)
		<-store.done
	}
	if !during {
		apply()
	}
	l, err := owner.Lock(ctx, "k", dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatalf("the owner's next Lock: %v", err)
	}
	if want := map[bool]int{false: 2, true: 1}[during]; l.Holds() != want {
		t.Fatalf("the owner's next Lock: holds %d; want %d", l.Holds(), want)
	}
	if during {
		apply()
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	time.Sleep(time.Second) // the give-back's retries, if any
	synctest.Wait()
	ol, err := other.TryLock(context.Background(), "k")
	if err == nil {
		_ = ol.Release(context.Background())
	}
	return err
}
