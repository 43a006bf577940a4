package memstore

import (
	"context"
	"time"

	"example.com/dlock/driver"
)

var _ driver.Breaker = (*Store)(nil)

// Break implements driver.Breaker: it frees key whoever holds it, all holds
// at once, wakes its subscribers as a final Release does, and returns the
// holding it ended as Inspect described it. The broken holder's Extend and
// Release answer driver.NotHeld(taken) until the holding would have
// expired; the store keeps that one entry until then (KeyState counts it).
// Fences come from the store's counter, which Break leaves alone. A free
// key returns Held false and changes nothing. Its only error is ctx's.
func (s *Store) Break(ctx context.Context, key string) (driver.BrokenHolding, error) {
	if err := ctx.Err(); err != nil {
		return driver.BrokenHolding{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(key)
	if e == nil {
		return driver.BrokenHolding{}, nil
	}
	now := s.now()
	info := driver.Info{Held: true, Token: e.token, Holds: e.holds, Fence: e.fence, Remaining: e.expires.Sub(now)}
	delete(s.locks, key)
	s.broken[key] = *e
	s.subs.notify(key)
	return driver.BrokenHolding{Info: info}, nil
}

// wasBroken reports whether Break ended token's holding of key (any
// token's, for token "") and that holding would not have expired yet. It
// drops an entry whose time has passed. Called with s.mu held.
func (s *Store) wasBroken(key, token string) bool {
	b, ok := s.broken[key]
	switch {
	case !ok:
		return false
	case !s.now().Before(b.expires):
		delete(s.broken, key)
		return false
	}
	return token == "" || b.token == token
}

// sweepBroken drops the Break entries whose holdings would have expired by
// now. Called with s.mu held.
func (s *Store) sweepBroken(now time.Time) {
	for k, b := range s.broken {
		if !now.Before(b.expires) {
			delete(s.broken, k)
		}
	}
}
