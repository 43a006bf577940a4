package memstore

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock/driver"
)

// The Semaphore keys: each a limit and its live holdings, each holding a
// token's k permits with a fence from the store's one counter and an expiry
// of its own. A key with no live holding has no entry, so its limit is
// forgotten and the next acquisition stores its own.

var (
	_ driver.Semaphore       = (*Store)(nil)
	_ driver.PermitNotifier  = (*Store)(nil)
	_ driver.PermitInspector = (*Store)(nil)
)

// semState is the store's Semaphore state.
type semState = keyState[*semKey]

type semKey struct {
	limit, used int
	holders     map[string]*permits
}

type permits struct {
	k       int
	fence   uint64
	expires time.Time
}

// semLive returns key's entry with its expired holdings dropped, or nil
// (dropping the entry) when none is left. Called with s.mu held.
func (s *Store) semLive(key string) *semKey {
	e := s.sem.keys[key]
	if e == nil {
		return nil
	}
	now := s.now()
	for tok, h := range e.holders {
		if !now.Before(h.expires) {
			delete(e.holders, tok)
			e.used -= h.k
		}
	}
	if len(e.holders) == 0 {
		delete(s.sem.keys, key)
		return nil
	}
	return e
}

// semSweep drops keys whose holdings have all expired once the map has
// doubled since the last sweep (sweepKeys). Called with s.mu held.
func (s *Store) semSweep() {
	sweepKeys(s.sem.keys, &s.sem.sweepAt, func(k string) { s.semLive(k) })
}

// AcquirePermits implements driver.Semaphore: token gets k of key's permits
// for ttl if k are free, and n becomes key's limit if none was out. A token
// that holds key with k permits already gets its holding back (same fence;
// expiry the later of the current one and ttl from now). Refusals change
// nothing: a *driver.PermitsTakenError when fewer than k are free, a
// *driver.LimitMismatchError when key's limit is not n, an error matching
// driver.ErrInvalid for bad arguments or a re-acquisition with another k,
// ctx's error when it is done.
func (s *Store) AcquirePermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) (driver.PermitGrant, error) {
	if err := start(ctx, driver.ValidatePermits(key, n, k, ttl)); err != nil {
		return driver.PermitGrant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.semLive(key)
	switch {
	case e == nil:
		s.semSweep()
		if s.sem.keys == nil {
			s.sem.keys = make(map[string]*semKey)
		}
		e = &semKey{limit: n, holders: make(map[string]*permits)}
		s.sem.keys[key] = e
	case e.limit != n:
		return driver.PermitGrant{}, &driver.LimitMismatchError{Stored: e.limit, Asked: n}
	}
	until := s.now().Add(ttl)
	if h := e.holders[token]; h != nil {
		if h.k != k {
			return driver.PermitGrant{}, fmt.Errorf("%w: the token holds %d permits of the key, asked for %d", driver.ErrInvalid, h.k, k)
		}
		if until.After(h.expires) {
			h.expires = until
		}
		return driver.PermitGrant{Fence: h.fence, Permits: k, Used: e.used, TTL: ttl}, nil
	}
	if e.used+k > e.limit {
		return driver.PermitGrant{}, &driver.PermitsTakenError{Used: e.used, Limit: e.limit, Remaining: earliest(e.holders).Sub(s.now())}
	}
	s.fence++
	e.holders[token] = &permits{k: k, fence: s.fence, expires: until}
	e.used += k
	return driver.PermitGrant{Fence: s.fence, Permits: k, Used: e.used, TTL: ttl}, nil
}

func (h *permits) expiry() time.Time { return h.expires }

// heldPermits returns key's entry and token's holding in it, or
// driver.NotHeld(false). Called with s.mu held.
func (s *Store) heldPermits(key, token string) (*semKey, *permits, error) {
	if e := s.semLive(key); e != nil && e.holders[token] != nil {
		return e, e.holders[token], nil
	}
	return nil, nil, driver.NotHeld(false)
}

// ExtendPermits implements driver.Semaphore: token's holding of key expires
// ttl from now, shorter or longer; other holdings are untouched. If token
// holds no permit of key it changes nothing and returns driver.NotHeld
// (ErrExpired). Bad keys and ttls match driver.ErrInvalid; a done ctx
// returns its error.
func (s *Store) ExtendPermits(ctx context.Context, key, token string, ttl time.Duration) (driver.PermitGrant, error) {
	if err := start(ctx, driver.ValidatePermits(key, 1, 1, ttl)); err != nil {
		return driver.PermitGrant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, h, err := s.heldPermits(key, token)
	if err != nil {
		return driver.PermitGrant{}, err
	}
	h.expires = s.now().Add(ttl)
	return driver.PermitGrant{Fence: h.fence, Permits: h.k, Used: e.used, TTL: ttl}, nil
}

// ReleasePermits implements driver.Semaphore: token's permits of key come
// back and key's permit subscribers wake. If token holds none it changes
// nothing and returns driver.NotHeld (ErrExpired). Bad keys match
// driver.ErrInvalid; a done ctx returns its error.
func (s *Store) ReleasePermits(ctx context.Context, key, token string) error {
	if err := start(ctx, driver.ValidateKey(key)); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, h, err := s.heldPermits(key, token)
	if err != nil {
		return err
	}
	delete(e.holders, token)
	if e.used -= h.k; len(e.holders) == 0 {
		delete(s.sem.keys, key)
	}
	s.sem.subs.notify(key)
	return nil
}

// SubscribePermits implements driver.PermitNotifier: every later
// ReleasePermits of key sends a value (coalesced: the channel holds one);
// an expiry sends nothing. Its only errors are a bad key's and ctx's;
// cancel may be called more than once.
func (s *Store) SubscribePermits(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := start(ctx, driver.ValidateKey(key)); err != nil {
		return nil, nil, err
	}
	ch, cancel := s.subscribe(&s.sem.subs, key)
	return ch, cancel, nil
}

// InspectPermits implements driver.PermitInspector. Its only errors are a
// bad key's and ctx's.
func (s *Store) InspectPermits(ctx context.Context, key string) (driver.PermitInfo, error) {
	if err := start(ctx, driver.ValidateKey(key)); err != nil {
		return driver.PermitInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var info driver.PermitInfo
	if e := s.semLive(key); e != nil {
		info.Limit, info.Used = e.limit, e.used
		for tok, h := range e.holders {
			info.Holders = append(info.Holders, driver.PermitHolder{Token: tok, Permits: h.k, Fence: h.fence, Remaining: h.expires.Sub(s.now())})
		}
	}
	return info, nil
}

// semEntries is how many entries the store keeps for the Semaphore key
// key: its holdings and its subscriptions. Called with s.mu held.
func (s *Store) semEntries(key string) int {
	n := len(s.sem.subs[key])
	if e := s.semLive(key); e != nil {
		n += len(e.holders)
	}
	return n
}
