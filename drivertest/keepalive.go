package drivertest

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// renewals runs Harness.KeepAlive (or the store's SessionKeeper) for the clients of a session-based store:
// one goroutine per client made by the suite, stopped when the client's
// test ends, when the suite kills the client, or while a case checks that
// Extend alone renews the session.
type renewals struct {
	mu   sync.Mutex
	stop map[any]func() // by client; only comparable clients can be stopped early
}

// client returns a new client from Harness.New as a Mutex (see store), for
// the mutex suite.
func (s *suite) client(t *testing.T) driver.Mutex {
	t.Helper()
	st := s.store(t)
	m, ok := st.(driver.Mutex)
	if !ok {
		t.Fatalf("drivertest: Harness.New returned a %T, which is no driver.Mutex", st)
	}
	return m
}

// keepAlive is Harness.KeepAlive or, unset, the store's SessionKeeper; nil
// if m has neither.
func (s *suite) keepAlive(m driver.Store) func(context.Context, driver.Store) error {
	if s.h.KeepAlive != nil {
		return s.h.KeepAlive
	}
	if _, ok := driver.As[driver.SessionKeeper](m); ok {
		return func(ctx context.Context, m driver.Store) error {
			k, _ := driver.As[driver.SessionKeeper](m)
			return k.KeepAlive(ctx)
		}
	}
	return nil
}

// store returns a new client from Harness.New; on a session-based store
// with Harness.KeepAlive set, or a SessionKeeper, its session is renewed
// every SessionTTL/4 until the test ends (see Harness.KeepAlive).
func (s *suite) store(t *testing.T) driver.Store {
	t.Helper()
	m := s.h.New(t)
	if !s.model.Session || s.keepAlive(m) == nil || s.model.SessionTTL <= 0 {
		return m
	}
	stop := s.renew(m)
	t.Cleanup(stop)
	if reflect.TypeOf(m).Comparable() {
		s.ren.mu.Lock()
		if s.ren.stop == nil {
			s.ren.stop = map[any]func(){}
		}
		s.ren.stop[m] = stop
		s.ren.mu.Unlock()
	}
	return m
}

// renew starts the keepalive loop of m and returns its stop function, which
// waits for the loop to end and may be called more than once.
func (s *suite) renew(m driver.Store) (stop func()) {
	period := s.model.SessionTTL / 4
	keep := s.keepAlive(m)
	quit, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				ctx, cancel := context.WithTimeout(context.Background(), period)
				_ = keep(ctx, m) // a failure shows as a lost key in the case
				cancel()
			case <-quit:
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit) }); <-ended }
}

// stopRenewal stops the keepalive loop of m, if the suite runs one. It
// fails t if it cannot (m's type is not comparable), since the case then
// would test the harness's renewal instead of the store.
func (s *suite) stopRenewal(t *testing.T, m driver.Store) {
	t.Helper()
	if !s.model.Session || s.keepAlive(m) == nil {
		return
	}
	if !reflect.TypeOf(m).Comparable() {
		t.Fatalf("drivertest: the suite renews sessions (Harness.KeepAlive or a SessionKeeper) but clients of type %T are not comparable: the suite cannot stop renewing one", m)
	}
	s.ren.mu.Lock()
	stop := s.ren.stop[m]
	delete(s.ren.stop, m)
	s.ren.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// kill stops the renewal of m and calls Harness.Kill on it.
func (s *suite) kill(t *testing.T, m driver.Store) {
	t.Helper()
	s.stopRenewal(t, m)
	s.h.Kill(t, m)
}
