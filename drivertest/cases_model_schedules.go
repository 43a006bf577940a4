package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// The schedules of issue 23, one deterministic case each: the model case
// finds them at random, these every time. Per-key stores: a, b and c, an
// Owner's holdings sharing one store record whose expiry another holding
// of the same owner cuts short. Session stores: a release with an ended
// context, and a fixed lease ending under an outer Do, must both leave the
// key free.

// ownerCtx returns a context acquiring as a new Owner, ending with the test.
func ownerCtx(t *testing.T) context.Context {
	return dlock.ContextWithOwner(ctx(t), dlock.NewOwner())
}

func mustLock(t *testing.T, cl *dlock.Client, ctx context.Context, key string, opts ...dlock.Option) *dlock.Lease {
	t.Helper()
	l, err := cl.Lock(ctx, key, opts...)
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	return l
}

// noOtherHolderWhileValid tries the key from another client of the store
// every 10 ms for d, or until l ends, and fails t if it gets the key while
// l reports itself valid: l is checked after the grant's reply, while the
// other client still holds the key.
func (s *suite) noOtherHolderWhileValid(t *testing.T, what, key string, l *dlock.Lease, d time.Duration) {
	t.Helper()
	m := s.client(t)
	tok := Token()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && l.Err() == nil {
		_, err := m.Acquire(ctx(t), key, tok, s.ttl)
		if err == nil {
			now := time.Now()
			if l.Err() == nil {
				t.Errorf("%s: another client acquired %q while the lease (fence %d, holds %d) reported itself valid for %v more",
					what, key, l.Fence(), l.Holds(), l.ValidUntil().Sub(now).Round(time.Millisecond))
			}
			mustRelease(t, m, key, tok)
			return
		}
		if !errors.Is(err, driver.ErrNotAcquired) {
			t.Fatalf("%s: Acquire by another client: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond) // polling pace, not synchronisation
	}
}

// keyFreeWithin checks invariant (2) after a schedule: the key is free
// within the give-back bound plus the slack.
func (s *suite) keyFreeWithin(t *testing.T, what, key string) {
	t.Helper()
	m := s.client(t)
	bound := giveBackBound + s.slack
	if tok := s.acquiredWithin(t, m, key, bound); tok != "" {
		mustRelease(t, m, key, tok)
		return
	}
	t.Errorf("%s: every holding ended, yet %q is still held %v later: %s", what, key, bound, s.keyState(t, m, key, nil))
}

// testNestedExtendShorter (schedule a): an Owner holds the key with a long
// fixed lease, re-enters, extends the inner holding shorter and releases
// it: the outer lease stays valid, so no other client may get the key.
func (s *suite) testNestedExtendShorter(t *testing.T, _ driver.Mutex) {
	cl, _ := s.modelClient(t)
	key, octx := Key(t), ownerCtx(t)
	outer := mustLock(t, cl, octx, key, dlock.WithTTL(s.long))
	inner := mustLock(t, cl, octx, key, dlock.WithTTL(s.long))
	if err := inner.Extend(octx, s.ttl); err != nil {
		t.Fatalf("inner Extend(%v): %v", s.ttl, err)
	}
	if err := inner.Release(octx); err != nil {
		t.Fatalf("inner Release: %v", err)
	}
	s.noOtherHolderWhileValid(t, "outer WithTTL lease after the inner one was extended shorter and released", key, outer, 4*s.ttl+s.slack)
	_ = outer.Release(octx)
	s.keyFreeWithin(t, "schedule a", key)
}

// testNestedShortRenewal (schedule b): Do with the default lease runs a
// nested Do renewed with a short period, then works on: the outer lease
// stays valid, so no other client may get the key.
func (s *suite) testNestedShortRenewal(t *testing.T, _ driver.Mutex) {
	cl, _ := s.modelClient(t)
	key := Key(t)
	// The inner lease must outlive one renewal round trip delayed by the
	// scheduler (2*ttl alone was lost at load 8-19), so it carries the
	// slack; it stays far shorter than the outer default lease.
	inner := 2*s.ttl + s.slack
	err := cl.Do(ctx(t), key, func(octx context.Context) error {
		outer, _ := dlock.LeaseFromContext(octx)
		err := cl.Do(octx, key, func(context.Context) error {
			time.Sleep(inner + inner/3) // work long enough to renew about four times
			return nil
		}, dlock.WithAutoRenew(inner))
		if err != nil {
			t.Errorf("nested Do: %v", err)
		}
		// Had a renewal shortened the outer lease to the inner one, the
		// key would be free within inner: watch for longer than that.
		s.noOtherHolderWhileValid(t, "outer Do (default lease) after a nested Do renewed every "+(inner/3).String(), key, outer, inner+4*s.ttl+s.slack)
		return nil
	})
	t.Logf("outer Do: %v", err)
	s.keyFreeWithin(t, "schedule b", key)
}

// testOuterRenewalShorter (schedule c): an Owner holds the key renewed
// with a short lease and re-enters with a long fixed one; the outer is
// renewed, then released: the inner lease stays valid, so no other client
// may get the key.
func (s *suite) testOuterRenewalShorter(t *testing.T, _ driver.Mutex) {
	cl, _ := s.modelClient(t)
	key, octx := Key(t), ownerCtx(t)
	outer := mustLock(t, cl, octx, key, dlock.WithAutoRenew(4*s.ttl))
	inner := mustLock(t, cl, octx, key, dlock.WithTTL(s.long))
	time.Sleep(2 * s.ttl) // the outer renews (every 4/3 ttl) meanwhile
	if err := outer.Release(octx); err != nil {
		t.Fatalf("outer Release: %v", err)
	}
	s.noOtherHolderWhileValid(t, "inner WithTTL lease after the outer renewed lease was released", key, inner, 8*s.ttl+s.slack)
	_ = inner.Release(octx)
	s.keyFreeWithin(t, "schedule c", key)
}

// testReleaseEndedContext (session stores): a Release whose context has
// already ended still frees the key, within the give-back bound; with and
// without an Owner.
func (s *suite) testReleaseEndedContext(t *testing.T, _ driver.Mutex) {
	cl, _ := s.modelClient(t)
	for _, owned := range []bool{false, true} {
		key, lctx := Key(t), ctx(t)
		if owned {
			lctx = ownerCtx(t)
		}
		l := mustLock(t, cl, lctx, key)
		ended, cancel := context.WithCancel(lctx)
		cancel()
		err := l.Release(ended)
		t.Logf("owner %v: Release with an ended context: %v", owned, err)
		what := "Release with an ended context"
		if owned {
			what += " (Owner)"
		}
		s.keyFreeWithin(t, what, key)
	}
}

// testNestedFixedLeaseEnds (session stores): Do(k){ Do(k, WithTTL(T)){
// outlast T } }: once both returned, the key is free within the give-back
// bound.
func (s *suite) testNestedFixedLeaseEnds(t *testing.T, _ driver.Mutex) {
	cl, _ := s.modelClient(t)
	key := Key(t)
	err := cl.Do(ctx(t), key, func(octx context.Context) error {
		err := cl.Do(octx, key, func(ictx context.Context) error {
			wait := time.NewTimer(s.model.SessionTTL + s.slack + 500*time.Millisecond)
			defer wait.Stop()
			select {
			case <-ictx.Done(): // the fixed lease ran out
			case <-wait.C:
				t.Errorf("the nested fixed lease did not end within the session TTL %v + %v", s.model.SessionTTL, s.slack)
			}
			return nil
		}, dlock.WithTTL(s.ttl))
		t.Logf("nested fixed Do: %v", err)
		return nil
	})
	t.Logf("outer Do: %v", err)
	s.keyFreeWithin(t, "nested fixed lease ended under an outer Do", key)
}

// testLostNestedThenHandoff (found by the model case after fd848f5, seed
// 108930929661067 on memstore): a Do without an Owner holds the key with
// its default lease; a holding nested through its context runs out (lost
// on the local clock) and is released; a sibling of the same Client waits
// for the key meanwhile, so that the Do's release is a local handoff. Once
// the Do returned, the key must pass to the sibling, or at least be free,
// within the give-back bound. The sibling starts before the nested lease
// runs out (a real-time wait of a lease, not a synchronisation): it is
// queued by then on any machine that is not stalled; if not, the case
// checks a plain release instead and passes.
func (s *suite) testLostNestedThenHandoff(t *testing.T, _ driver.Mutex) {
	cl, _ := s.modelClient(t)
	key := Key(t)
	sibling := make(chan error, 1)
	err := cl.Do(ctx(t), key, func(fctx context.Context) error {
		l, err := cl.Lock(fctx, key, dlock.WithTTL(s.ttl))
		if err != nil {
			return err
		}
		go func() {
			wctx, cancel := context.WithTimeout(context.Background(), s.model.TTLFor(s.ttl)+giveBackBound+2*s.slack)
			defer cancel()
			w, err := cl.Lock(wctx, key, dlock.WithTTL(s.ttl))
			if err == nil {
				err = w.Release(context.Background())
			}
			sibling <- err
		}()
		bound := time.NewTimer(s.model.TTLFor(s.ttl) + s.slack)
		defer bound.Stop()
		select {
		case <-l.Done():
		case <-bound.C:
			t.Errorf("the nested fixed lease did not run out within %v", s.model.TTLFor(s.ttl)+s.slack)
		}
		t.Logf("nested Release after its loss: %v", l.Release(fctx))
		return nil
	})
	returned := time.Now()
	t.Logf("outer Do: %v", err)
	if err := <-sibling; err != nil {
		t.Errorf("the sibling waiting for %q never got it (%v after the Do returned): %v; %s",
			key, time.Since(returned).Round(time.Millisecond), err, s.keyState(t, s.client(t), key, nil))
	}
	s.keyFreeWithin(t, "lost nested holding, then a local handoff", key)
}
