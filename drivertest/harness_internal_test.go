package drivertest

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// TestDurationsFollowTheModel: the short lease is max(150 ms, MinTTL)
// rounded up to Granularity, the long one covers 20 short ones and stays
// within MaxTTL, and the harness's zero values get their defaults.
func TestDurationsFollowTheModel(t *testing.T) {
	cases := []struct {
		name      string
		m         driver.Model
		ttl, long time.Duration
	}{
		{"redis", driver.Model{MinTTL: 10 * time.Millisecond, Granularity: time.Millisecond}, 150 * time.Millisecond, 10 * time.Second},
		{"whole seconds", driver.Model{Granularity: time.Second}, time.Second, 20 * time.Second},
		{"etcd-like minimum", driver.Model{MinTTL: 2 * time.Second, Granularity: time.Second}, 2 * time.Second, 40 * time.Second},
		{"odd granularity", driver.Model{MinTTL: 160 * time.Millisecond, Granularity: 100 * time.Millisecond}, 200 * time.Millisecond, 10 * time.Second},
		{"capped", driver.Model{MinTTL: time.Millisecond, MaxTTL: 5 * time.Second}, 150 * time.Millisecond, 5 * time.Second},
	}
	for _, tc := range cases {
		s := newSuite(Harness{}, tc.m)
		if s.ttl != tc.ttl || s.long != tc.long {
			t.Errorf("%s: ttl %v, long %v; want %v, %v", tc.name, s.ttl, s.long, tc.ttl, tc.long)
		}
	}
	s := newSuite(Harness{}, driver.Model{})
	if s.slack != DefaultSlack || s.h.Clients != 3 || s.h.Goroutines != 4 || s.h.Rounds != 5 {
		t.Errorf("defaults: slack %v, %d clients × %d goroutines × %d rounds", s.slack, s.h.Clients, s.h.Goroutines, s.h.Rounds)
	}
	s = newSuite(Harness{Slack: time.Second, Clients: 2, Goroutines: 8, Rounds: 1}, driver.Model{})
	if s.slack != time.Second || s.h.Clients != 2 || s.h.Goroutines != 8 || s.h.Rounds != 1 {
		t.Errorf("given values not kept: slack %v, %d × %d × %d", s.slack, s.h.Clients, s.h.Goroutines, s.h.Rounds)
	}
}

// TestSessionStoresRunSessionCases: a session-based model swaps the per-key
// TTL cases for the session ones; every case name is unique.
func TestSessionStoresRunSessionCases(t *testing.T) {
	names := func(m driver.Model) map[string]bool {
		got := map[string]bool{}
		for _, c := range newSuite(Harness{}, m).cases() {
			if got[c.name] {
				t.Errorf("case %s listed twice", c.name)
			}
			got[c.name] = true
		}
		return got
	}
	perKey := names(driver.Model{MinTTL: time.Millisecond})
	session := names(driver.Model{Session: true, SessionTTL: 2 * time.Second})
	for _, c := range []string{"ExpiryFreesKey", "ExtendNeverRecreates", "ReentryNeverShortensTheHolding", "ExtendShorterShortensTheHolding"} {
		if !perKey[c] || session[c] {
			t.Errorf("%s: per-key %v, session %v; want only per-key", c, perKey[c], session[c])
		}
	}
	for _, c := range []string{"SessionExtendRenews", "KilledSessionFreesItsKeys"} {
		if perKey[c] || !session[c] {
			t.Errorf("%s: per-key %v, session %v; want only session", c, perKey[c], session[c])
		}
	}
}

// modelOnly is a Store that offers no primitive.
type modelOnly struct{}

func (modelOnly) Model() driver.Model { return driver.Model{} }

// wrapped is a Store that wraps a Mutex without being one.
type wrapped struct{ m driver.Mutex }

func (wrapped) Model() driver.Model    { return driver.Model{} }
func (w wrapped) Unwrap() driver.Store { return w.m }

// TestSuitesFollowTheOfferedPrimitives: a store that implements
// driver.Mutex gets the mutex suite, with the same cases as cases(), and
// one that implements driver.Semaphore, driver.RWMutex, driver.RateLimiter
// or driver.Idempotency that primitive's suite (memstore all five, a store
// with only one primitive's methods that one's alone); a store that
// offers no primitive gets none (Run then fails it), also when it wraps a
// Mutex, since a wrapper must implement a primitive itself.
func TestSuitesFollowTheOfferedPrimitives(t *testing.T) {
	var m driver.Mutex = memstore.New(nil)
	ps := offered(m)
	if len(ps) != 5 || ps[0].name != "Mutex" || ps[1].name != "Semaphore" || ps[2].name != "RWMutex" || ps[3].name != "RateLimiter" || ps[4].name != "Idempotency" {
		t.Fatalf("memstore is offered %d suites, want the mutex, semaphore, read-write lock, rate limiter and idempotency suites", len(ps))
	}
	if ps := offered(semOnly{memstore.New(nil)}); len(ps) != 1 || ps[0].name != "Semaphore" {
		t.Fatalf("a driver.Semaphore alone is offered %d suites, want the semaphore suite", len(ps))
	}
	if ps := offered(rwOnly{memstore.New(nil)}); len(ps) != 1 || ps[0].name != "RWMutex" {
		t.Fatalf("a driver.RWMutex alone is offered %d suites, want the read-write lock suite", len(ps))
	}
	if ps := offered(rateOnly{memstore.New(nil)}); len(ps) != 1 || ps[0].name != "RateLimiter" {
		t.Fatalf("a driver.RateLimiter alone is offered %d suites, want the rate limiter suite", len(ps))
	}
	if ps := offered(idemOnly{memstore.New(nil)}); len(ps) != 1 || ps[0].name != "Idempotency" {
		t.Fatalf("a driver.Idempotency alone is offered %d suites, want the idempotency suite", len(ps))
	}
	s := newSuite(Harness{}, driver.Model{})
	got, want := ps[0].cases(s), s.cases()
	if len(got) != len(want) {
		t.Fatalf("mutex suite has %d cases, cases() %d", len(got), len(want))
	}
	for i := range got {
		if got[i].name != want[i].name {
			t.Errorf("case %d: %s, want %s", i, got[i].name, want[i].name)
		}
	}
	for _, st := range []driver.Store{modelOnly{}, wrapped{m}} {
		if ps := offered(st); len(ps) != 0 {
			t.Errorf("%T is offered %d suites, want none", st, len(ps))
		}
	}
}

// semOnly has the Semaphore methods and no Mutex ones.
type semOnly struct{ driver.Semaphore }

// rwOnly has the RWMutex methods and no others.
type rwOnly struct{ driver.RWMutex }

// rateOnly has the RateLimiter methods alone.
type rateOnly struct{ driver.RateLimiter }

// idemOnly is a store that offers driver.Idempotency alone.
type idemOnly struct{ driver.Idempotency }

// keeper is a Mutex that is a driver.SessionKeeper, counting its calls.
type keeper struct {
	driver.Mutex
	n *int
}

func (k keeper) KeepAlive(context.Context) error { *k.n++; return nil }

// TestKeepAliveDefaultsToTheSessionKeeper: with Harness.KeepAlive unset the
// suite renews a SessionKeeper's session with its KeepAlive (also through a
// wrapper); a Harness.KeepAlive, when set, wins; the control is a store
// without the capability, which the suite does not renew.
func TestKeepAliveDefaultsToTheSessionKeeper(t *testing.T) {
	n := 0
	k := keeper{memstore.New(nil), &n}
	s := newSuite(Harness{}, driver.Model{Session: true, SessionTTL: time.Second})
	for _, st := range []driver.Store{k, wrapped{k}} {
		f := s.keepAlive(st)
		if f == nil {
			t.Fatalf("%T: no keepalive, want the store's", st)
		}
		_ = f(context.Background(), st)
	}
	if n != 2 {
		t.Errorf("the store's KeepAlive ran %d times, want 2", n)
	}
	hooked := 0
	s.h.KeepAlive = func(context.Context, driver.Store) error { hooked++; return nil }
	_ = s.keepAlive(k)(context.Background(), k)
	if hooked != 1 || n != 2 {
		t.Errorf("with Harness.KeepAlive set: hook ran %d times, the store %d more; want 1 and 0", hooked, n-2)
	}
	s.h.KeepAlive = nil
	if f := s.keepAlive(memstore.New(nil)); f != nil { // control
		t.Error("a store without SessionKeeper gets a keepalive")
	}
}
