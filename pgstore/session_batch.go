package pgstore

import (
	"context"
	"errors"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

var _ driver.BatchExtender = (*SessionStore)(nil)

// heldSQL lists the bigint advisory locks this backend holds in the
// current database, as (classid, objid).
const heldSQL = `SELECT classid::bigint, objid::bigint FROM pg_locks WHERE pid = pg_backend_pid() AND granted
	AND locktype = 'advisory' AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// ExtendBatch implements driver.BatchExtender: one statement per pinned
// connection, listing the advisory locks its backend holds, confirms every
// requested holding on that connection at once (Extend is one statement per
// key). A request this store cannot confirm that way (not its holding, or
// not found on its connection) is answered by Extend, so each result is
// what Extend would have returned.
func (s *SessionStore) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	out := make([]driver.ExtendResult, len(reqs))
	groups := map[*pinned][]int{}
	for i, r := range reqs {
		if h := s.eng.Own(r.Key, r.Token); h != nil {
			groups[h.P] = append(groups[h.P], i)
			continue
		}
		out[i].Grant, out[i].Err = s.Extend(ctx, r.Key, r.Token, r.TTL)
	}
	for p, idx := range groups {
		held, err := s.heldOn(ctx, p)
		for _, i := range idx {
			r := reqs[i]
			h := s.eng.Own(r.Key, r.Token)
			switch {
			case err != nil && !errors.Is(err, errConnDead):
				out[i].Err = classify("extend", err)
			case err == nil && h != nil && h.P == p && held[h.Lock]:
				out[i].Grant = s.eng.Grant(h)
			default: // lost, released meanwhile, or moved: Extend says which
				out[i].Grant, out[i].Err = s.Extend(ctx, r.Key, r.Token, r.TTL)
			}
		}
	}
	return out
}

// heldOn returns the lock ids p's backend holds.
func (s *SessionStore) heldOn(ctx context.Context, p *pinned) (map[int64]bool, error) {
	v, err := s.eng.Pins.Run(ctx, p, func(ctx context.Context, c *pgxpool.Conn) (any, error) {
		rows, err := c.Query(ctx, heldSQL)
		if err != nil {
			return nil, err
		}
		held := map[int64]bool{}
		var hi, lo int64
		_, err = pgx.ForEachRow(rows, []any{&hi, &lo}, func() error {
			held[int64(uint64(hi)<<32|uint64(lo))] = true
			return nil
		})
		return held, err
	}, nil)
	if err != nil {
		return nil, err
	}
	return v.(map[int64]bool), nil
}
