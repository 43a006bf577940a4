package dlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/memstore"
)

// semCalls is a Semaphore store that counts its renewal calls and the
// holdings they renew. It has no Unwrap and no batch: renewal must call
// ExtendPermits once per holding. semBatched adds the batch.
type semCalls struct {
	driver.Semaphore
	calls, renewed atomic.Int64
}

func (s *semCalls) ExtendPermits(ctx context.Context, key, token string, ttl time.Duration) (driver.PermitGrant, error) {
	s.calls.Add(1)
	s.renewed.Add(1)
	return s.Semaphore.ExtendPermits(ctx, key, token, ttl)
}

// semBatched renews a batch with one call (as a pipeline is one round trip).
type semBatched struct{ *semCalls }

func (s semBatched) ExtendPermitsBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	s.calls.Add(1)
	out := make([]driver.ExtendResult, len(reqs))
	for i, q := range reqs {
		s.renewed.Add(1)
		g, err := s.Semaphore.ExtendPermits(ctx, q.Key, q.Token, q.TTL)
		out[i] = driver.ExtendResult{Grant: driver.Grant{Fence: g.Fence, Holds: g.Permits, TTL: g.TTL}, Err: err}
	}
	return out
}

// renewPermits holds 4 permits of 4 keys, taken at one instant, for three
// of their leases and returns the renewal calls and holdings renewed.
func renewPermits(t *testing.T, st driver.Semaphore, c *semCalls) (calls, renewed int64) {
	synctest.Test(t, func(t *testing.T) {
		s := newSems(t, st)
		const lease = 300 * time.Millisecond
		var ps []*dlock.Permit
		for _, k := range []string{"a", "b", "c", "d"} {
			ps = append(ps, mustAcquire(t, s, k, 2, 1, dlock.WithAutoRenew(lease)))
		}
		// On the bubble's clock, ending between two renewal ticks: at a
		// tick's instant the releases below may race it and split a batch.
		time.Sleep(3*lease - lease/6)
		for _, p := range ps {
			if err := p.Err(); err != nil {
				t.Fatalf("permit lost while renewed: %v", err)
			}
			if err := p.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
	return c.calls.Load(), c.renewed.Load()
}

// Permits due together are renewed in one call when the store batches
// (driver.PermitBatchExtender), as the mutex's leases are: one round trip
// per renewal tick, however many permits the Semaphores holds. Control:
// the same store without the batch takes one call per permit.
func TestPermitRenewalIsBatched(t *testing.T) {
	c := &semCalls{Semaphore: memstore.New(nil)}
	calls, renewed := renewPermits(t, semBatched{c}, c)
	if renewed < 4 || calls*4 != renewed {
		t.Fatalf("batched store: %d calls renewed %d holdings, want one call per 4", calls, renewed)
	}
	c = &semCalls{Semaphore: memstore.New(nil)}
	calls, renewed = renewPermits(t, c, c)
	if renewed < 4 || calls != renewed {
		t.Fatalf("control, no batch: %d calls renewed %d holdings, want one call each", calls, renewed)
	}
	t.Logf("without batching: %d calls for %d renewals", calls, renewed)
}
