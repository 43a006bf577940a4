package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Cases for the rules of driver.Mutex.Release that hold on every store.

// testReleaseEnded: a Release whose context has already ended (cancelled,
// or past its deadline) returns at once an error matching that context's
// error and changes nothing, in the store or in the client: the key stays
// held by the token (Inspect, where the store offers it, reports the same
// holding; another client's Acquire contends; the holder's Extend keeps the
// fence and hold count), and so does another key the client holds (a store
// that drops a connection or session to abandon the call would free it);
// a Release with a live context then frees the key.
//
// The rule is driver.Mutex.Release's. A store that releases anyway loses
// the key behind the caller's back; one that forgets the holding locally
// (drops what it knows of it) leaves the key held with nothing left that
// can release it.
func (s *suite) testReleaseEnded(t *testing.T, m driver.Mutex) {
	other := s.client(t)
	type holding struct {
		name, key, tok string
		g              driver.Grant
	}
	a, b := holding{"a", Key(t), Token(), driver.Grant{}}, holding{"b", Key(t), Token(), driver.Grant{}}
	a.g = mustAcquire(t, m, a.key, a.tok, s.long)
	b.g = mustAcquire(t, m, b.key, b.tok, s.long)

	cancelled, cancel := context.WithCancel(ctx(t))
	cancel()
	expired, cancelExpired := context.WithDeadline(ctx(t), time.Now().Add(-time.Millisecond))
	defer cancelExpired()
	for _, c := range []context.Context{cancelled, expired} {
		start := time.Now()
		err := m.Release(c, a.key, a.tok)
		if took := time.Since(start); !errors.Is(err, c.Err()) || took > s.slack {
			t.Errorf("Release with an ended context (%v) returned %v after %v; want an error matching %v, at once",
				c.Err(), err, took, c.Err())
		}
	}

	in, inspects := driver.As[driver.Inspector](other)
	for _, h := range []holding{a, b} {
		what := "after the Releases of key a with ended contexts, key " + h.name
		if inspects {
			s.checkHeld(t, what, inspect(t, in, h.key), h.tok, h.g.Fence, 1)
		}
		if _, err := other.Acquire(ctx(t), h.key, Token(), s.long); !errors.Is(err, driver.ErrNotAcquired) {
			t.Fatalf("%s: another client's Acquire got %v; want it contended (the key still held)", what, err)
		}
		if e, err := m.Extend(ctx(t), h.key, h.tok, s.long); err != nil || e.Fence != h.g.Fence || e.Holds != 1 {
			t.Fatalf("%s: the holder's Extend = %+v, %v; want fence %d, holds 1 (the holding unchanged)", what, e, err, h.g.Fence)
		}
	}

	if err := m.Release(ctx(t), a.key, a.tok); err != nil {
		t.Fatalf("a live Release of key a after the ended ones: %v; want nil (the holding kept for it)", err)
	}
	s.wantFree(t, other, a.key)
	s.wantContended(t, other, b.key)
	mustRelease(t, m, b.key, b.tok)
}
