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
// one Extend per lease, all at once: one after the other, a hung Extend
// would hold up the rest of the batch until its deadline, which the batch
// shares, and they would fail with it.
type extender struct{ c *Client }

// ExtendMany implements lease.Extender.
func (e extender) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	c := e.c
	if b := c.caps.batch; b != nil && len(reqs) > 1 {
		return b.ExtendBatch(ctx, reqs)
	}
	results := make([]driver.ExtendResult, len(reqs))
	fanOut(len(reqs), func(i int) {
		q := reqs[i]
		results[i].Grant, results[i].Err = c.store.Extend(ctx, q.Key, q.Token, q.TTL)
	})
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
// An Owner's lease renews only when no other call sets its record's expiry,
// and asks for at least what the record's other live holdings need
// (Lease.ask); it is looked at again shortly otherwise.
func (r *renewable) BeginRenewal() (driver.ExtendRequest, time.Time, bool) {
	l := (*Lease)(r)
	rec := l.rec.Load()
	if rec != nil && !l.c.records.tryBegin(rec) {
		return driver.ExtendRequest{}, time.Time{}, false
	}
	ttl, validUntil, ok := l.tryBeginCall()
	if ok && l.rec.Load() != rec { // joined a record meanwhile: next time
		l.v.EndCall()
		ok = false
	}
	if !ok {
		if rec != nil {
			l.c.records.end(rec)
		}
		return driver.ExtendRequest{}, validUntil, false
	}
	return driver.ExtendRequest{Key: l.key, Token: l.token, TTL: l.ask(ttl)}, validUntil, true
}

// SettleRenewal implements lease.Renewable (see Lease.settle). The lease's
// TTL cannot change while its call is under way: it is the one renewal
// asked for, before Lease.ask raised it.
func (r *renewable) SettleRenewal(start time.Time, req driver.ExtendRequest, res driver.ExtendResult) bool {
	l := (*Lease)(r)
	ttl, _ := l.v.Current()
	err := classify(res.Err)
	if l.watch != nil {
		l.observe(context.Background(), renewEvent(start, l.v.Now(), err))
	}
	err = l.settle(start, min(ttl, req.TTL), req.TTL, res.Grant, err)
	if rec := l.rec.Load(); rec != nil { // the one of BeginRenewal: a record is joined only between calls
		l.c.records.end(rec)
	}
	return err != nil
}

// Current implements lease.Renewable.
func (r *renewable) Current() (time.Duration, bool) {
	return r.v.Current()
}

func isNotHeld(err error) bool { return errors.Is(err, ErrNotHeld) }
