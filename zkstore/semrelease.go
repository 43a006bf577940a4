package zkstore

import (
	"context"
	"errors"
	"sync"
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
	if !ok {
		f, err := s.semForeign(ctx, key, token, sp)
		switch {
		case err != nil:
			return driver.PermitGrant{}, err
		case f != nil:
			return driver.PermitGrant{}, errOtherSession(key)
		}
		return driver.PermitGrant{}, driver.NotHeld(false)
	}
	g, err := s.semConfirm(ctx, key, token, sp, h, ttl, start)
	if errors.Is(err, errGone) {
		return driver.PermitGrant{}, driver.NotHeld(false)
	}
	return g, err
}

// ReleasePermits implements driver.Semaphore: one multi that deletes the
// token's lease nodes (all or none), which wakes a Curator acquirer
// waiting for a lease. Leases of the token held through another session
// are found by the token's digest in the nodes' data and deleted too. If
// they are already gone while the store's session lives, a release of the
// token ran: nil. A ctx already done changes nothing; a connection
// failure leaves the holding recorded and the outcome unknown.
func (s *Store) ReleasePermits(ctx context.Context, key, token string) error {
	if err := driver.ValidateKey(key); err != nil {
		return err
	}
	if err := s.checkSemKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	sp := s.semPath(key)
	h, ok := s.semLookup(key, token)
	if !ok {
		f, err := s.semForeign(ctx, key, token, sp)
		if err != nil || f == nil {
			if err == nil {
				err = driver.NotHeld(false)
			}
			return err
		}
		h = f
	}
	ops := make([]any, len(h.paths))
	for i, p := range h.paths {
		ops[i] = &zk.DeleteRequest{Path: p, Version: -1}
	}
	err := s.write(ctx, func() error {
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
	var mu sync.Mutex
	var found *semHolding
	var errs []error
	var wg sync.WaitGroup
	for _, n := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var data []byte
			var st *zk.Stat
			err := s.read(ctx, func() error {
				var e error
				data, st, e = s.conn.Get(lp + "/" + n)
				return e
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				errs = append(errs, err)
				return
			}
			if k, d, ok := parseSemData(data); err == nil && ok && d == dig {
				if found == nil {
					found = &semHolding{sid: st.EphemeralOwner, n: limit, k: k, fence: st.Czxid}
				}
				found.paths = append(found.paths, lp+"/"+n)
			}
		}()
	}
	wg.Wait()
	if found == nil && len(errs) > 0 {
		return nil, wrapErr("read the leases of", key, errors.Join(errs...))
	}
	return found, nil
}
