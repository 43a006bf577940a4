package dlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// faultStore wraps a store, counts calls, and can fail or delay them. It
// has no Unwrap, so it hides the wrapped store's capabilities: tests using
// it exercise the fallbacks (backoff instead of notify, release and acquire
// instead of handoff, one Extend per lease, no read with the grant).
// unwrapStore is the same wrapper letting them through.
type faultStore struct {
	driver.Mutex
	calls     atomic.Int64
	failExt   atomic.Bool  // Extend returns an unavailable-style error
	acqDelay  atomic.Int64 // nanoseconds to sleep before Acquire's reply
	released  atomic.Int64
	mu        sync.Mutex
	lastToken string
}

var errDown = errors.New("connection refused")

func (f *faultStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	f.calls.Add(1)
	f.mu.Lock()
	f.lastToken = token
	f.mu.Unlock()
	g, err := f.Mutex.Acquire(ctx, key, token, ttl)
	if d := f.acqDelay.Load(); d > 0 {
		time.Sleep(time.Duration(d)) // simulates a reply held in the network
	}
	return g, err
}

func (f *faultStore) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	f.calls.Add(1)
	if f.failExt.Load() {
		return driver.Grant{}, errDown
	}
	return f.Mutex.Extend(ctx, key, token, ttl)
}

func (f *faultStore) Release(ctx context.Context, key, token string) error {
	f.calls.Add(1)
	f.released.Add(1)
	return f.Mutex.Release(ctx, key, token)
}

func newClient(t *testing.T, opts ...dlock.Option) (*dlock.Client, *faultStore) {
	t.Helper()
	fs := &faultStore{Mutex: memstore.New(nil)}
	c, err := dlock.New(fs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, c)
	return c, fs
}

// closeOnCleanup closes c when the test ends, so that no background
// give-back (giveback.go) outlives it: within 2 s, after which Close stops
// them.
func closeOnCleanup(t *testing.T, c *dlock.Client) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustLock(t *testing.T, c *dlock.Client, ctx context.Context, key string, opts ...dlock.Option) *dlock.Lease {
	t.Helper()
	l, err := c.Lock(ctx, key, opts...)
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	return l
}

func release(t *testing.T, l *dlock.Lease) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// within fails the test unless ch closes within d.
func within(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch: // already closed: a select with a ready timer would pick at random
		return
	default:
	}
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
}

// unwrapStore is a faultStore that lets the Client find the wrapped store's
// capabilities (driver.As); only Acquire, Extend and Release are counted.
type unwrapStore struct{ *faultStore }

func (s unwrapStore) Unwrap() driver.Mutex { return s.faultStore.Mutex }
