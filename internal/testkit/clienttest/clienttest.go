// Package clienttest is the test helpers that drive a dlock Client, shared
// by the root package's tests (on memstore) and the stores' tests (on a
// real server): locking and releasing with the test failing on an error, a
// store wrapper whose renewals can hang, a watcher of overlapping holders,
// and the nested-holdings schedules. It starts no server: its users bring
// the store.
package clienttest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit"
)

// MustLock locks key through c, failing the test on an error.
func MustLock(t testing.TB, c *dlock.Client, ctx context.Context, key string, opts ...dlock.Option) *dlock.Lease {
	t.Helper()
	l, err := c.Lock(ctx, key, opts...)
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	return l
}

// Release releases l, failing the test on an error.
func Release(t testing.TB, l *dlock.Lease) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// NewClient returns a Client of s, closed when the test ends.
func NewClient(t testing.TB, s driver.Mutex, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	c, err := dlock.New(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	testkit.CloseOnCleanup(t, c)
	return c
}

// ExtendHook wraps a store, counts Extend calls and can make those of one
// key hang until their context ends, as a call whose reply never comes;
// Started and Ended are closed when the first such call starts and ends.
// It is deliberately not a BatchExtender, and has no Unwrap (the wrapped
// store's BatchExtender would bypass the hook): the renewer then calls
// Extend once per lease of a batch.
type ExtendHook struct {
	driver.Mutex
	Extends        atomic.Int64
	Started, Ended chan struct{}

	hangKey atomic.Pointer[string]
	hung    atomic.Int64
}

// NewExtendHook returns a hook over s whose Extend of hangKey hangs (none
// if hangKey is empty).
func NewExtendHook(s driver.Mutex, hangKey string) *ExtendHook {
	h := &ExtendHook{Mutex: s, Started: make(chan struct{}), Ended: make(chan struct{})}
	h.Hang(hangKey)
	return h
}

// Hang makes the Extend calls of key hang from now on ("" for none).
func (h *ExtendHook) Hang(key string) { h.hangKey.Store(&key) }

// Extend is the store's, or hangs until ctx ends for the hung key.
func (h *ExtendHook) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	h.Extends.Add(1)
	if k := *h.hangKey.Load(); k != "" && key == k {
		first := h.hung.Add(1) == 1
		if first {
			close(h.Started)
		}
		<-ctx.Done()
		if first {
			close(h.Ended)
		}
		return driver.Grant{}, ctx.Err()
	}
	return h.Mutex.Extend(ctx, key, token, ttl)
}

// OverlapWatch polls other's TryLock on key every 5 ms until it acquires
// or limit passes, and counts overlaps: acquisitions made while the
// holder's lease still reported itself valid (Err nil, or the try started
// before its ValidUntil). It returns the overlaps and whether the key was
// acquired.
func OverlapWatch(t testing.TB, other *dlock.Client, holder *dlock.Lease, key string, limit time.Duration) (overlaps int, acquired bool) {
	t.Helper()
	ctx := testkit.Ctx(t)
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		tryStart := time.Now()
		l, err := other.TryLock(ctx, key, dlock.WithTTL(time.Second))
		if err == nil {
			if herr := holder.Err(); herr == nil || tryStart.Before(holder.ValidUntil()) {
				overlaps++
				t.Logf("overlap: acquired while the holder reports Err=%v, %v of validity left at the try", herr, holder.ValidUntil().Sub(tryStart))
			}
			Release(t, l)
			return overlaps, true
		}
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock: %v", err)
		}
		<-time.After(5 * time.Millisecond)
	}
	return overlaps, false
}
