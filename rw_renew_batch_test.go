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

// rwCalls is an RWMutex store that counts its renewal calls and the
// holdings they renew. It has no Unwrap and no batch: renewal must call
// ExtendRW once per holding. rwBatched adds the batch.
type rwCalls struct {
	driver.RWMutex
	calls, renewed atomic.Int64
}

func (s *rwCalls) ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	s.calls.Add(1)
	s.renewed.Add(1)
	return s.RWMutex.ExtendRW(ctx, key, token, ttl)
}

// rwBatched renews a batch with one call (as a pipeline is one round trip).
type rwBatched struct{ *rwCalls }

func (s rwBatched) ExtendRWBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	s.calls.Add(1)
	out := make([]driver.ExtendResult, len(reqs))
	for i, q := range reqs {
		s.renewed.Add(1)
		g, err := s.RWMutex.ExtendRW(ctx, q.Key, q.Token, q.TTL)
		out[i] = driver.ExtendResult{Grant: driver.Grant{Fence: g.Fence, Holds: 1, TTL: g.TTL}, Err: err}
	}
	return out
}

// renewRW holds three reads of one key and a write of another, taken at
// one instant, for three of their leases, and returns the renewal calls
// and holdings renewed.
func renewRW(t *testing.T, st driver.RWMutex, c *rwCalls) (calls, renewed int64) {
	synctest.Test(t, func(t *testing.T) {
		l := newRWLocks(t, st)
		const lease = 300 * time.Millisecond
		ctx := context.Background()
		var hs []*dlock.RWHolding
		for _, take := range []func(context.Context, string, ...dlock.Option) (*dlock.RWHolding, error){l.RLock, l.RLock, l.RLock} {
			h, err := take(ctx, "read", dlock.WithAutoRenew(lease))
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
		w, err := l.Lock(ctx, "write", dlock.WithAutoRenew(lease))
		if err != nil {
			t.Fatal(err)
		}
		// On the bubble's clock, ending between two renewal ticks: at a
		// tick's instant the releases below may race it and split a batch.
		time.Sleep(3*lease - lease/6)
		for _, h := range append(hs, w) {
			if err := h.Err(); err != nil {
				t.Fatalf("holding lost while renewed: %v", err)
			}
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
	return c.calls.Load(), c.renewed.Load()
}

// Read and write holdings due together are renewed in one call when the
// store batches (driver.RWBatchExtender), as permits are: one round trip
// per renewal tick, however many holdings the RWLocks has. Control: the
// same store without the batch takes one call per holding.
func TestRWRenewalIsBatched(t *testing.T) {
	c := &rwCalls{RWMutex: memstore.New(nil)}
	calls, renewed := renewRW(t, rwBatched{c}, c)
	if renewed < 4 || calls*4 != renewed {
		t.Fatalf("batched store: %d calls renewed %d holdings, want one call per 4", calls, renewed)
	}
	c = &rwCalls{RWMutex: memstore.New(nil)}
	calls, renewed = renewRW(t, c, c)
	if renewed < 4 || calls != renewed {
		t.Fatalf("control, no batch: %d calls renewed %d holdings, want one call each", calls, renewed)
	}
	t.Logf("without batching: %d calls for %d renewals", calls, renewed)
}
