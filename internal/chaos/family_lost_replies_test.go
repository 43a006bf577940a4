package chaos_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// memstore runs in process: no connection for a fault proxy to cut. Its
// workers get their lost replies from lossyMem instead.

// lossEvery is how often lossyMem loses a reply: one successful call of
// the read-write lock or the semaphore in lossEvery.
const lossEvery = 7

// errLostReply is the answer to a call whose reply was lost: the call was
// applied, as a store that answered too late would have applied it.
var errLostReply = fmt.Errorf("%w: chaos: the reply was lost after the store applied the call", driver.ErrUnavailable)

// lossyMem is one worker's view of a shared memstore: every lossEvery-th
// successful AcquireRead, AcquireWrite, ExtendRW, ReleaseRW,
// AcquirePermits, ExtendPermits or ReleasePermits is applied and answered
// with errLostReply. Everything else (notifications included) is the
// store's.
type lossyMem struct {
	*memstore.Store
	calls atomic.Int64
}

// lose makes call and returns its answer, or errLostReply for every
// lossEvery-th success.
func lose[G any](l *lossyMem, call func() (G, error)) (G, error) {
	g, err := call()
	if err == nil && l.calls.Add(1)%lossEvery == 0 {
		var zero G
		return zero, errLostReply
	}
	return g, err
}

func (l *lossyMem) AcquireRead(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	return lose(l, func() (driver.RWGrant, error) { return l.Store.AcquireRead(ctx, key, token, ttl) })
}

func (l *lossyMem) AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	return lose(l, func() (driver.RWGrant, error) { return l.Store.AcquireWrite(ctx, key, token, ttl) })
}

func (l *lossyMem) ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	return lose(l, func() (driver.RWGrant, error) { return l.Store.ExtendRW(ctx, key, token, ttl) })
}

func (l *lossyMem) ReleaseRW(ctx context.Context, key, token string) error {
	_, err := lose(l, func() (struct{}, error) { return struct{}{}, l.Store.ReleaseRW(ctx, key, token) })
	return err
}

func (l *lossyMem) AcquirePermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) (driver.PermitGrant, error) {
	return lose(l, func() (driver.PermitGrant, error) { return l.Store.AcquirePermits(ctx, key, token, n, k, ttl) })
}

func (l *lossyMem) ExtendPermits(ctx context.Context, key, token string, ttl time.Duration) (driver.PermitGrant, error) {
	return lose(l, func() (driver.PermitGrant, error) { return l.Store.ExtendPermits(ctx, key, token, ttl) })
}

func (l *lossyMem) ReleasePermits(ctx context.Context, key, token string) error {
	_, err := lose(l, func() (struct{}, error) { return struct{}{}, l.Store.ReleasePermits(ctx, key, token) })
	return err
}
