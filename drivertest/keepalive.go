package drivertest

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// renewals runs Harness.KeepAlive for the clients of a session-based store:
// one goroutine per client made by the suite, stopped when the client's
// test ends, when the suite kills the client, or while a case checks that
// Extend alone renews the session.
type renewals struct {
	mu   sync.Mutex
	stop map[any]func() // by client; only comparable clients can be stopped early
}

// client returns a new client from Harness.New; on a session-based store
// with Harness.KeepAlive set, its session is renewed every SessionTTL/4
// until the test ends (see Harness.KeepAlive).
func (s *suite) client(t *testing.T) driver.Mutex {
	t.Helper()
	m := s.h.New(t)
	if !s.model.Session || s.h.KeepAlive == nil || s.model.SessionTTL <= 0 {
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
func (s *suite) renew(m driver.Mutex) (stop func()) {
	period := s.model.SessionTTL / 4
	quit, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				ctx, cancel := context.WithTimeout(context.Background(), period)
				_ = s.h.KeepAlive(ctx, m) // a failure shows as a lost key in the case
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
func (s *suite) stopRenewal(t *testing.T, m driver.Mutex) {
	t.Helper()
	if !s.model.Session || s.h.KeepAlive == nil {
		return
	}
	if !reflect.TypeOf(m).Comparable() {
		t.Fatalf("drivertest: Harness.KeepAlive is set but clients of type %T are not comparable: the suite cannot stop renewing one", m)
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
func (s *suite) kill(t *testing.T, m driver.Mutex) {
	t.Helper()
	s.stopRenewal(t, m)
	s.h.Kill(t, m)
}
