package drivertest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"example.com/dlock/driver"
)

// faultStore wraps a store at the driver.Mutex seam and, on command of the
// model's generator (arm), makes the next call of one kind either lose its
// request (nothing reaches the store) or lose its reply (the store applies
// the call, the caller gets an error): the lost replies of a network blip.
// Both errors match driver.ErrUnavailable, as an unreachable store's would.
//
// It implements driver.Unwrapper so that the Client still finds the
// store's capabilities. Calls made through a capability (Queuer's
// AcquireQueued, Transferer's handoff, BatchExtender's batched renewal,
// Atomic's steps) go to the wrapped store directly and so bypass the
// faults: only Acquire, Extend and Release are faulted.
type faultStore struct {
	inner driver.Mutex

	mu    sync.Mutex
	armed [faultKinds]faultMode
	fired int // faults that took effect, for the trace
}

// faultKind names the call a fault is armed for.
type faultKind int

const (
	faultAcquire faultKind = iota
	faultExtend
	faultRelease
	faultKinds
)

// faultMode is what happens to the call.
type faultMode int

const (
	noFault     faultMode = iota
	dropRequest           // not sent; the caller gets errFaultDropped
	loseReply             // applied; the caller gets errFaultLost
)

func (m faultMode) String() string {
	return [...]string{"none", "drop request", "lose reply"}[m]
}

var (
	errFaultDropped = fmt.Errorf("%w: drivertest: request dropped (fault)", driver.ErrUnavailable)
	errFaultLost    = fmt.Errorf("%w: drivertest: reply lost after the store applied the call (fault)", driver.ErrUnavailable)
)

var _ driver.Unwrapper = (*faultStore)(nil)

// arm makes the next call of kind k fail with mode m.
func (f *faultStore) arm(k faultKind, m faultMode) {
	f.mu.Lock()
	f.armed[k] = m
	f.mu.Unlock()
}

// take returns the fault armed for kind k and disarms it.
func (f *faultStore) take(k faultKind) faultMode {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.armed[k]
	if m != noFault {
		f.armed[k] = noFault
		f.fired++
	}
	return m
}

func (f *faultStore) Unwrap() driver.Store { return f.inner }

func (f *faultStore) Model() driver.Model { return f.inner.Model() }

func (f *faultStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	switch f.take(faultAcquire) {
	case dropRequest:
		return driver.Grant{}, errFaultDropped
	case loseReply:
		_, _ = f.inner.Acquire(ctx, key, token, ttl)
		return driver.Grant{}, errFaultLost
	}
	return f.inner.Acquire(ctx, key, token, ttl)
}

func (f *faultStore) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	switch f.take(faultExtend) {
	case dropRequest:
		return driver.Grant{}, errFaultDropped
	case loseReply:
		_, _ = f.inner.Extend(ctx, key, token, ttl)
		return driver.Grant{}, errFaultLost
	}
	return f.inner.Extend(ctx, key, token, ttl)
}

func (f *faultStore) Release(ctx context.Context, key, token string) error {
	switch f.take(faultRelease) {
	case dropRequest:
		return errFaultDropped
	case loseReply:
		_ = f.inner.Release(ctx, key, token)
		return errFaultLost
	}
	return f.inner.Release(ctx, key, token)
}
