package dlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// modelStore is memstore declaring another time model; it records the ttl
// of every Acquire and Extend that reached it.
type modelStore struct {
	*memstore.Store
	model driver.Model
	mu    sync.Mutex
	ttls  []time.Duration // Acquire and Extend ttls, in call order
}

func newModelStore(m driver.Model, now func() time.Time) *modelStore {
	return &modelStore{Store: memstore.New(now), model: m}
}

func (s *modelStore) Model() driver.Model { return s.model }

func (s *modelStore) record(ttl time.Duration) {
	s.mu.Lock()
	s.ttls = append(s.ttls, ttl)
	s.mu.Unlock()
}

func (s *modelStore) seen() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.ttls...)
}

func (s *modelStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	s.record(ttl)
	return s.Store.Acquire(ctx, key, token, ttl)
}

func (s *modelStore) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	s.record(ttl)
	return s.Store.Extend(ctx, key, token, ttl)
}

// wholeSeconds is an etcd-like per-key model: whole seconds, 2 s to 1 min.
var wholeSeconds = driver.Model{MinTTL: 2 * time.Second, MaxTTL: time.Minute, Granularity: time.Second, ServerClock: true}

// A TTL outside the store's bounds is refused with ErrInvalid naming them,
// before any I/O, by New, Lock, TryLock, Do and Extend.
func TestModelBoundsAreEnforcedBeforeIO(t *testing.T) {
	s := newModelStore(wholeSeconds, nil)
	for _, opt := range []dlock.Option{dlock.WithTTL(time.Second), dlock.WithTTL(2 * time.Minute), dlock.WithAutoRenew(500 * time.Millisecond)} {
		_, err := dlock.New(s, opt)
		if !errors.Is(err, dlock.ErrInvalid) || !strings.Contains(err.Error(), "2s") || !strings.Contains(err.Error(), "1m0s") {
			t.Fatalf("New: %v, want ErrInvalid naming the bounds 2s and 1m0s", err)
		}
	}
	c, err := dlock.New(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if _, err := c.Lock(ctx, "k", dlock.WithTTL(1500*time.Millisecond)); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("Lock below MinTTL: %v", err)
	}
	if _, err := c.TryLock(ctx, "k", dlock.WithAutoRenew(61*time.Second)); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("TryLock above MaxTTL: %v", err)
	}
	if err := c.Do(ctx, "k", func(context.Context) error { return nil }, dlock.WithTTL(time.Second)); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("Do below MinTTL: %v", err)
	}
	if n := len(s.seen()); n != 0 {
		t.Fatalf("%d store calls for refused TTLs", n)
	}
	l := mustLock(t, c, ctx, "k", dlock.WithTTL(2*time.Second))
	before := l.ValidUntil()
	if err := l.Extend(ctx, 90*time.Second); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("Extend above MaxTTL: %v", err)
	}
	if n := len(s.seen()); n != 1 || !l.ValidUntil().Equal(before) {
		t.Fatalf("refused Extend: %d store calls (want the Acquire only), validity moved %v", n, l.ValidUntil().Sub(before))
	}
	release(t, l)
}

// Lease lengths are rounded up to the store's granularity, on acquisition
// and Extend; a millisecond store gets whole milliseconds.
func TestModelRoundsUpToGranularity(t *testing.T) {
	for _, tc := range []struct {
		name        string
		model       driver.Model
		ttl, extend time.Duration
		want        []time.Duration
	}{
		{"seconds", wholeSeconds, 2100 * time.Millisecond, 3001 * time.Millisecond, []time.Duration{3 * time.Second, 4 * time.Second}},
		{"milliseconds", driver.Model{MinTTL: 10 * time.Millisecond, Granularity: time.Millisecond}, 10500 * time.Microsecond, time.Second, []time.Duration{11 * time.Millisecond, time.Second}},
		{"none", driver.Model{}, 10500 * time.Microsecond, time.Second, []time.Duration{10500 * time.Microsecond, time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newModelStore(tc.model, nil)
			c, err := dlock.New(s)
			if err != nil {
				t.Fatal(err)
			}
			ctx := testCtx(t)
			l := mustLock(t, c, ctx, "k", dlock.WithTTL(tc.ttl))
			if err := l.Extend(ctx, tc.extend); err != nil {
				t.Fatal(err)
			}
			release(t, l)
			if got := s.seen(); len(got) != 2 || got[0] != tc.want[0] || got[1] != tc.want[1] {
				t.Fatalf("store saw ttls %v, want %v", got, tc.want)
			}
		})
	}
}

// The default lease is raised to a store's MinTTL; a store with a smaller
// minimum keeps DefaultLease.
func TestModelRaisesTheDefaultLease(t *testing.T) {
	for _, tc := range []struct {
		model driver.Model
		want  time.Duration
	}{
		{driver.Model{MinTTL: 45 * time.Second, Granularity: time.Second}, 45 * time.Second},
		{wholeSeconds, dlock.DefaultLease},
		{driver.Model{MinTTL: time.Second, MaxTTL: 5 * time.Second}, 5 * time.Second},
	} {
		s := newModelStore(tc.model, nil)
		c, err := dlock.New(s)
		if err != nil {
			t.Fatalf("%+v: %v", tc.model, err)
		}
		l := mustLock(t, c, testCtx(t), "k")
		release(t, l)
		if got := s.seen(); len(got) != 1 || got[0] != tc.want {
			t.Fatalf("%+v: default lease %v, want %v", tc.model, got, tc.want)
		}
	}
}

// On a session-based store every lease lasts the session's TTL whatever
// WithTTL says, and renewal follows it: every SessionTTL/3.
func TestModelSessionUsesSessionTTL(t *testing.T) {
	const session = 300 * time.Millisecond
	clk := newFakeClock()
	s := newModelStore(driver.Model{Session: true, SessionTTL: session, Granularity: time.Second}, clk.Now)
	c, err := dlock.New(s, dlock.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	fixed := mustLock(t, c, ctx, "fixed", dlock.WithTTL(time.Hour))
	if r := fixed.Remaining(); r > session || r < session-drift(session) {
		t.Fatalf("WithTTL(1h) on a session store: remaining %v, want the session's %v less drift", r, session)
	}
	release(t, fixed)
	l := mustLock(t, c, ctx, "renewed", dlock.WithAutoRenew(time.Minute))
	clk.Advance(session/3 - time.Millisecond)
	if got := s.seen(); len(got) != 2 {
		t.Fatalf("renewed before SessionTTL/3: store saw %v", got)
	}
	clk.Advance(time.Millisecond)
	if got := s.seen(); len(got) != 3 || got[2] != session {
		t.Fatalf("at SessionTTL/3: store saw %v, want a third call asking for %v", got, session)
	}
	release(t, l)
	for _, ttl := range s.seen() {
		if ttl != session {
			t.Fatalf("store was asked for %v, want the session's %v every time", ttl, session)
		}
	}
}

func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }
