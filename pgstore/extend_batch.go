package pgstore

import (
	"context"

	"example.com/dlock/driver"
	"example.com/dlock/internal/extendbatch"
)

var _ driver.BatchExtender = (*Store)(nil)

// ExtendBatch implements driver.BatchExtender: one statement moves the
// expiry of every live holding the requests name, so a renewal tick costs
// one round trip however many leases are due. A request it did not extend
// (not held, taken, or a key and token already earlier in the batch) is
// answered by Extend, so each result is what Extend would have returned.
func (s *Store) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	out := make([]driver.ExtendResult, len(reqs))
	batched, rest := extendbatch.Split(reqs, out, func(r driver.ExtendRequest) error { return s.check(r.Key, r.TTL) })
	names, owners, ttls := make([]string, len(batched)), make([]string, len(batched)), make([]int64, len(batched))
	for j, i := range batched {
		names[j], owners[j], ttls[j] = reqs[i].Key, digest(reqs[i].Token), micros(reqs[i].TTL)
	}
	done := make([]bool, len(reqs))
	if len(batched) > 0 {
		err := s.db.query(ctx, s.sql.extendBatch, []any{names, owners, ttls}, func(scan func(...any) error) (bool, error) {
			var n, fence, holds int64
			if err := scan(&n, &fence, &holds); err != nil {
				return false, err
			}
			i := batched[n-1]
			out[i].Grant, done[i] = driver.Grant{Fence: uint64(fence), Holds: int(holds), TTL: reqs[i].TTL}, true
			return true, nil
		})
		if err != nil { // the outcome is unknown: no request is answered
			for _, i := range append(batched, rest...) {
				out[i] = driver.ExtendResult{Err: wrap("extend", err)}
			}
			return out
		}
		for _, i := range batched {
			if !done[i] {
				rest = append(rest, i)
			}
		}
	}
	for _, i := range rest { // not extended: Extend says why (NotHeld, taken or not)
		out[i].Grant, out[i].Err = s.Extend(ctx, reqs[i].Key, reqs[i].Token, reqs[i].TTL)
	}
	return out
}
