package drivertest_test

import (
	"context"
	"fmt"
	"net/url"
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

func (m metered) Unwrap() driver.Mutex { return m.Mutex }

// A store package registers its URL scheme from init, for driver.Open and
// the CLI's --store.
func init() {
	driver.Register("metered-mem", func(_ context.Context, u *url.URL) (*driver.Opened, error) {
		s := metered{memstore.New(nil), new(atomic.Int64)}
		return &driver.Opened{Store: s, Close: func() error { return nil }, Describe: "metered in-memory store"}, nil
	})
}

// TestWrapperConformance is what a store's own test file holds: Harness.New
// makes a new client of one server per call (memstore's "server" is the
// Store itself, shared). The wrapper passes the suite with the wrapped
// store's capabilities, and the suite's acquisitions went through it.
func TestWrapperConformance(t *testing.T) {
	server := memstore.New(nil)
	var acquires atomic.Int64
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Mutex { return metered{server, &acquires} },
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

// Capabilities are found through wrappers with driver.As; stores are opened
// by URL with driver.Open.
func ExampleRun() {
	o, err := driver.Open(context.Background(), "metered-mem://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer o.Close()
	_, notifies := driver.As[driver.Notifier](o.Store) // memstore's, through the wrapper
	_, queues := driver.As[driver.Queuer](o.Store)     // no store in the chain has one
	fmt.Println(o.Describe, notifies, queues)
	_, err = driver.Open(context.Background(), "nosuch://")
	fmt.Println(err != nil)
	// Output:
	// metered in-memory store true false
	// true
}
