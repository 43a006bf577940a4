package memstore

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock/driver"
)

var _ driver.Transferer = (*Store)(nil)

// Transfer implements driver.Transferer: the new holding gets the key's next
// fence, one hold and a fresh expiry; waiters are not notified (the key is
// never free). If from does not hold key it changes nothing and returns
// driver.NotHeld, as Extend; if from holds it more than once, an error
// matching driver.ErrInvalid, also changing nothing.
func (s *Store) Transfer(ctx context.Context, key, from, to string, ttl time.Duration) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.transfer(key, from, to, ttl)
}

// transfer is Transfer. Called with s.mu held.
func (s *Store) transfer(key, from, to string, ttl time.Duration) (driver.Grant, error) {
	e, err := s.owned(key, from)
	if err != nil {
		return driver.Grant{}, err
	}
	if e.holds != 1 {
		return driver.Grant{}, fmt.Errorf("%w: %q is held more than once by its owner: not transferable", driver.ErrInvalid, key)
	}
	s.fence++
	e.token, e.fence, e.expires = to, s.fence, s.now().Add(ttl)
	return driver.Grant{Fence: e.fence, Holds: 1, TTL: ttl}, nil
}
