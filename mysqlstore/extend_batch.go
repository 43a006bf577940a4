package mysqlstore

import (
	"context"
	"strings"

	"example.com/dlock/driver"
	"example.com/dlock/internal/extendbatch"
)

var _ driver.BatchExtender = (*Store)(nil)

// extendBatchSize bounds the requests of one statement (3 placeholders
// each, far below the protocol's 65,535).
const extendBatchSize = 500

// ExtendBatch implements driver.BatchExtender: per 500 requests, one
// UPDATE moves the expiry of every live holding they name and one SELECT
// reads back the holdings that are live and theirs, so a renewal tick costs
// two statements however many leases are due. A request found not live
// (not held, taken, or a key and token already earlier in the batch) is
// answered by Extend, so each result is what Extend would have returned.
func (s *Store) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	out := make([]driver.ExtendResult, len(reqs))
	batched, rest := extendbatch.Split(reqs, out, func(r driver.ExtendRequest) error { return checkArgs(r.Key, r.Token, r.TTL, true) })
	for len(batched) > 0 {
		part := batched[:min(len(batched), extendBatchSize)]
		batched = batched[len(part):]
		if err := s.extendPart(ctx, reqs, part, out); err != nil {
			for _, i := range append(append(part, batched...), rest...) {
				out[i] = driver.ExtendResult{Err: err} // the outcome is unknown
			}
			return out
		}
		for _, i := range part {
			if out[i].Grant.Fence == 0 {
				rest = append(rest, i)
			}
		}
	}
	for _, i := range rest { // not extended: Extend says why (NotHeld, taken or not)
		out[i].Grant, out[i].Err = s.Extend(ctx, reqs[i].Key, reqs[i].Token, reqs[i].TTL)
	}
	return out
}

// extendPart extends the requests reqs[i] for i in part (distinct keys and
// tokens) and sets out[i].Grant for each live holding it then reads back.
func (s *Store) extendPart(ctx context.Context, reqs []driver.ExtendRequest, part []int, out []driver.ExtendResult) error {
	var tvc strings.Builder // the requests as a derived table: name, owner, ttl
	args := make([]any, 0, 3*len(part))
	at := make(map[[2]string]int, len(part))
	for j, i := range part {
		if j == 0 {
			tvc.WriteString("SELECT ? AS name, ? AS owner, ? AS ttl")
		} else {
			tvc.WriteString(" UNION ALL SELECT ?, ?, ?")
		}
		d := digest(reqs[i].Token)
		args = append(args, []byte(reqs[i].Key), d, reqs[i].TTL.Microseconds())
		at[[2]string{reqs[i].Key, string(d)}] = i
	}
	join := s.n.locks + " AS l JOIN (" + tvc.String() + ") AS r ON l.name = r.name AND l.owner = r.owner"
	update := "UPDATE " + join + " SET l.expires_at = IF(l.expires_at > " + now + ", " + now + " + INTERVAL r.ttl MICROSECOND, l.expires_at)"
	for try := 0; ; try++ {
		_, err := s.db.ExecContext(ctx, update, args...)
		if err == nil {
			break
		}
		if errNumber(err) != erDeadlock || try == 2 {
			return wrap("extend", err)
		}
		s.deadlocks.Add(1) // a victim is rolled back whole: retried, as exec does
	}
	rows, err := s.db.QueryContext(ctx, "SELECT l.name, l.owner, l.holds, l.fence FROM "+join+
		" WHERE l.expires_at > "+now+" AND l.holds > 0", args...)
	if err != nil {
		return wrap("extend", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, owner []byte
		var g driver.Grant
		if err := rows.Scan(&name, &owner, &g.Holds, &g.Fence); err != nil {
			return wrap("extend", err)
		}
		if i, ok := at[[2]string{string(name), string(owner)}]; ok {
			g.TTL = reqs[i].TTL
			out[i].Grant = g
		}
	}
	if err := rows.Err(); err != nil {
		return wrap("extend", err)
	}
	return nil
}
