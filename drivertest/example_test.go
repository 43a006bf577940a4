package drivertest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/drivertest"
	"example.com/dlock/memstore"
)

// metered is a store wrapper, as a metrics decorator would be: it counts
// acquisitions and, through Unwrap, leaves every capability of the store
// it wraps visible to driver.As (and so to dlock.Client).
type metered struct {
	driver.Mutex
	acquires *atomic.Int64
}

func (m metered) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	m.acquires.Add(1)
	return m.Mutex.Acquire(ctx, key, token, ttl)
}

func (m metered) Unwrap() driver.Store { return m.Mutex }

// TestWrapperConformance is what a store's own test file holds: Harness.New
// makes a new client of one server per call (memstore's "server" is the
// Store itself, shared). The wrapper passes the suite with the wrapped
// store's capabilities, and the suite's acquisitions went through it.
func TestWrapperConformance(t *testing.T) {
	server := memstore.New(nil)
	var acquires atomic.Int64
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Store { return metered{server, &acquires} },
	})
	if acquires.Load() == 0 {
		t.Error("no acquisition went through the wrapper")
	}
	// Negative control: without Unwrap, the same wrapper hides every
	// capability of the store it wraps.
	type opaque struct{ driver.Mutex }
	if _, ok := driver.As[driver.Notifier](opaque{server}); ok {
		t.Error("driver.As found a capability through a wrapper without Unwrap")
	}
	if _, ok := driver.As[driver.Notifier](metered{server, &acquires}); !ok {
		t.Error("driver.As did not find memstore's Notifier through Unwrap")
	}
}

// A store's conformance test: Harness.New returns a new client of one
// running server per call (here memstore's "server" is the Store itself,
// shared); the optional hooks (Pause, Kill, KeepAlive, Foreign) turn on the
// cases that need them, and Skip names known findings with their reason.
func ExampleRun() {
	server := memstore.New(nil)
	testConformance := func(t *testing.T) { // func TestConformance(t *testing.T) in a store's package
		drivertest.Run(t, drivertest.Harness{
			New:   func(t *testing.T) driver.Store { return server },
			Slack: 50 * time.Millisecond, // a loaded CI machine: widen every time bound
		})
	}
	_ = testConformance
}
