package memstore

import (
	"context"
	"time"

	"example.com/dlock/driver"
)

// The RateLimiter keys: each its TAT (driver.GCRA) on the store's clock. A
// key whose TAT has passed is as fresh and has no entry: it is dropped when
// next read, and by a sweep once the map has doubled.

var _ driver.RateLimiter = (*Store)(nil)

// rateState is the store's RateLimiter state. Its map is made on first use.
type rateState struct {
	tats    map[string]time.Time
	sweepAt int // sweep passed TATs when len(tats) reaches it
}

// AllowN implements driver.RateLimiter on the store's clock (the now given
// to New): n of key's budget under limit, all or none (driver.GCRA). A
// denied call changes nothing. Bad arguments match driver.ErrInvalid
// (driver.ValidateRate), checked before ctx; a done ctx returns its error.
func (s *Store) AllowN(ctx context.Context, key string, limit driver.RateLimit, n int) (driver.RateResult, error) {
	if err := driver.ValidateRate(key, limit, n); err != nil {
		return driver.RateResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.RateResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	tat, ok := s.rate.tats[key]
	if ok && !tat.After(now) {
		delete(s.rate.tats, key)
	}
	r, next := driver.GCRA(now, tat, limit, n)
	if r.Allowed == 0 {
		return r, nil
	}
	if s.rate.tats == nil {
		s.rate.tats = make(map[string]time.Time)
	}
	if _, ok := s.rate.tats[key]; !ok {
		s.rateSweep(now)
	}
	s.rate.tats[key] = next
	return r, nil
}

// rateSweep drops passed TATs once the map has doubled since the last
// sweep. Called with s.mu held.
func (s *Store) rateSweep(now time.Time) {
	if len(s.rate.tats) < s.rate.sweepAt {
		return
	}
	for k, tat := range s.rate.tats {
		if !tat.After(now) {
			delete(s.rate.tats, k)
		}
	}
	s.rate.sweepAt = max(64, 2*len(s.rate.tats))
}

// rateEntries is 1 if key has a TAT still ahead of now (dropping a passed
// one), else 0. Called with s.mu held.
func (s *Store) rateEntries(key string) int {
	tat, ok := s.rate.tats[key]
	if !ok {
		return 0
	}
	if !tat.After(s.now()) {
		delete(s.rate.tats, key)
		return 0
	}
	return 1
}
