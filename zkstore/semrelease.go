package zkstore

import (
	"context"
	"errors"
	"time"

	"example.com/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// ExtendPermits implements driver.Semaphore: a sync and a listing of the
// leases that shows ours (2 round trips, no write). ttl is ignored; the
// grant's TTL is how long the session is certain to last, at most ttl. A
// token whose leases live in another session (another Store) gets an
// error matching driver.ErrInvalid; a token that holds none
// NotHeld(false).
func (s *Store) ExtendPermits(ctx context.Context, key, token string, ttl time.Duration) (driver.PermitGrant, error) {
	if err := driver.ValidatePermits(key, 1, 1, ttl); err != nil {
		return driver.PermitGrant{}, err
	}
	if err := s.checkSemKey(key); err != nil {
		return driver.PermitGrant{}, err
	}
	start := time.Now()
	sp := s.semPath(key)
	h, ok := s.semLookup(key, token)
	h, err := heldHere(key, h, ok, func() (*semHolding, error) { return s.semForeign(ctx, key, token, sp) })
	if err != nil {
		return driver.PermitGrant{}, err
	}
	g, err := s.semConfirm(ctx, key, token, sp, h, ttl, start)
	return g, goneIsNotHeld(err)
}

// ReleasePermits implements driver.Semaphore: one multi that deletes the
// token's lease nodes (all or none), which wakes a Curator acquirer
// waiting for a lease. Leases of the token held through another session
// are found by the token's digest in the nodes' data and deleted too. If
// they are already gone while the store's session lives, a release of the
// token ran: nil. A ctx already done changes nothing; a connection
// failure leaves the holding recorded and the outcome unknown.
func (s *Store) ReleasePermits(ctx context.Context, key, token string) error {
	if err := checkRelease(ctx, key, s.checkSemKey); err != nil {
		return err
	}
	sp := s.semPath(key)
	h, ok := s.semLookup(key, token)
	h, err := heldAnywhere(h, ok, func() (*semHolding, error) { return s.semForeign(ctx, key, token, sp) })
	if err != nil {
		return err
	}
	ops := make([]any, len(h.paths))
	for i, p := range h.paths {
		ops[i] = &zk.DeleteRequest{Path: p, Version: -1}
	}
	err = s.write(ctx, func() error {
		_, e := s.conn.Multi(ops...)
		return e
	})
	switch {
	case err == nil:
		s.semSet(key, token, nil)
		return nil
	case errors.Is(err, zk.ErrNoNode):
		s.semSet(key, token, nil)
		if ok && h.sid == s.conn.SessionID() {
			return nil
		}
		return driver.NotHeld(false)
	}
	return wrapErr("release the leases of", key, err)
}

// semForeign finds the token's lease nodes of key that this store has not
// recorded, by the token's digest in their data (one read of each node,
// all at once); nil if there are none.
func (s *Store) semForeign(ctx context.Context, key, token, sp string) (*semHolding, error) {
	leases, limit, err := s.semLeases(ctx, key, sp)
	if err != nil || len(leases) == 0 {
		return nil, err
	}
	lp, dig := sp+"/"+semLeases, digest(token)
	var found *semHolding
	err = s.readNodes(ctx, lp, leases, func(n string, data []byte, st *zk.Stat) {
		if k, d, ok := parseSemData(data); ok && d == dig {
			if found == nil {
				found = &semHolding{sid: st.EphemeralOwner, n: limit, k: k, fence: st.Czxid}
			}
			found.paths = append(found.paths, lp+"/"+n)
		}
	})
	if found == nil && err != nil {
		return nil, wrapErr("read the leases of", key, err)
	}
	return found, nil
}
