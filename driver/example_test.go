package driver_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// counting is a store wrapper, as a metrics decorator would be: it counts
// acquisitions and, through Unwrap, leaves every capability of the store it
// wraps visible to driver.As (and so to dlock.Client).
type counting struct {
	driver.Mutex
	acquires *atomic.Int64
}

func (c counting) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	c.acquires.Add(1)
	return c.Mutex.Acquire(ctx, key, token, ttl)
}

func (c counting) Unwrap() driver.Store { return c.Mutex }

// A store package registers its URL scheme from init, for driver.Open and
// the CLI's --store.
func init() {
	driver.Register("counting-mem", func(_ context.Context, u *url.URL) (*driver.Opened, error) {
		s := counting{memstore.New(nil), new(atomic.Int64)}
		return &driver.Opened{Store: s, Close: func() error { return nil }, Describe: "counting in-memory store"}, nil
	})
}

// Capabilities are found through wrappers: As looks through Unwrap.
func ExampleAs() {
	var s driver.Mutex = counting{memstore.New(nil), new(atomic.Int64)}
	_, notifies := driver.As[driver.Notifier](s) // memstore's, through the wrapper
	_, queues := driver.As[driver.Queuer](s)     // no store in the chain has one
	fmt.Println(notifies, queues)
	// Output: true false
}

// Open finds the opener registered for the URL's scheme; an unknown scheme
// is ErrInvalid.
func ExampleOpen() {
	ctx := context.Background()
	o, err := driver.Open(ctx, "counting-mem://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer o.Close()
	fmt.Println(o.Describe)
	_, err = driver.Open(ctx, "nosuch://")
	fmt.Println(errors.Is(err, driver.ErrInvalid))
	// Output:
	// counting in-memory store
	// true
}

// A store answers a contended Acquire with a *ContendedError and a refused
// Extend or Release with NotHeld: the Client tells them apart with
// errors.Is and errors.As.
func ExampleNotHeld() {
	ctx := context.Background()
	s := memstore.New(nil)
	if _, err := s.Acquire(ctx, "k", "owner-a", time.Minute); err != nil {
		fmt.Println(err)
		return
	}
	_, err := s.Acquire(ctx, "k", "owner-b", time.Minute)
	var ce *driver.ContendedError
	fmt.Println(errors.As(err, &ce), errors.Is(err, driver.ErrNotAcquired))
	err = s.Release(ctx, "k", "owner-b")
	fmt.Println(errors.Is(err, driver.ErrNotHeld), errors.Is(err, driver.ErrTaken))
	// Output:
	// true true
	// true true
}
