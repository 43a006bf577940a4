package dlock

import (
	"context"
	"errors"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/lease"
)

// Renewal runs in the lease engine (internal/lease.Renewer): one loop per
// Client, batching the leases that are due together. The mutex provides the
// calls (extender) and its leases' side of it (renewable).

// extender is the Client's side of renewal: one pipelined round trip when
// the store is a BatchExtender and the batch has more than one lease, else
// one Extend per lease.
type extender struct{ c *Client }

// ExtendMany implements lease.Extender.
func (e extender) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	c := e.c
	if b := c.caps.batch; b != nil && len(reqs) > 1 {
		return b.ExtendBatch(ctx, reqs)
	}
	results := make([]driver.ExtendResult, len(reqs))
	for i, q := range reqs {
		results[i].Grant, results[i].Err = c.store.Extend(ctx, q.Key, q.Token, q.TTL)
	}
	return results
}

// renewable is a Lease as the renewal loop sees it (lease.Renewable): a
// type of its own, so that those methods stay out of Lease's API.
type renewable Lease

func (l *Lease) renewable() *renewable { return (*renewable)(l) }

// Slot implements lease.Renewable.
func (r *renewable) Slot() *lease.Slot { return &r.renewal }

// BeginRenewal implements lease.Renewable: a renewal asks for the TTL the
// key's expiry was set to last.
func (r *renewable) BeginRenewal() (driver.ExtendRequest, time.Time, bool) {
	l := (*Lease)(r)
	ttl, validUntil, ok := l.tryBeginCall()
	return driver.ExtendRequest{Key: l.key, Token: l.token, TTL: ttl}, validUntil, ok
}

// SettleRenewal implements lease.Renewable (see Lease.settle).
func (r *renewable) SettleRenewal(start time.Time, req driver.ExtendRequest, res driver.ExtendResult) bool {
	return (*Lease)(r).settle(start, req.TTL, res.Grant, classify(res.Err)) != nil
}

// Current implements lease.Renewable.
func (r *renewable) Current() (time.Duration, bool) {
	return r.v.Current()
}

func isNotHeld(err error) bool { return errors.Is(err, ErrNotHeld) }
