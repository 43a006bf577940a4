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
	"example.com/dlock/internal/testkit"
	"example.com/dlock/internal/testkit/clienttest"
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
	lastMeta  string // the holder metadata the last Acquire's ctx carried
}

var errDown = errors.New("connection refused")

func (f *faultStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	f.calls.Add(1)
	f.mu.Lock()
	f.lastToken, f.lastMeta = token, driver.MetaFrom(ctx)
	f.mu.Unlock()
	g, err := f.Mutex.Acquire(ctx, key, token, ttl)
	if d := f.acqDelay.Load(); d > 0 {
		time.Sleep(time.Duration(d)) // a reply held in the network (its one user runs in a synctest bubble)
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

// The shared helpers (internal/testkit, internal/testkit/clienttest) under
// the names this package's tests use.
var (
	testCtx        = testkit.Ctx
	within         = testkit.Closed
	closeOnCleanup = testkit.CloseOnCleanup
	mustLock       = clienttest.MustLock
	release        = clienttest.Release
	newClientOn    = clienttest.NewClient
	waitFor        = testkit.WaitFor
)

// unwrapStore is a faultStore that lets the Client find the wrapped store's
// capabilities (driver.As); only Acquire, Extend and Release are counted.
type unwrapStore struct{ *faultStore }

func (s unwrapStore) Unwrap() driver.Mutex { return s.faultStore.Mutex }
