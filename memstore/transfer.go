package memstore

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock"
)

var _ dlock.Transferer = (*Store)(nil)

// Transfer implements dlock.Transferer: the new holding gets the key's next
// fence, one hold and a fresh expiry; waiters are not notified (the key is
// never free).
func (s *Store) Transfer(ctx context.Context, key, from, to string, ttl time.Duration) (dlock.Grant, error) {
	if err := ctx.Err(); err != nil {
		return dlock.Grant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.transfer(key, from, to, ttl)
}

// transfer is Transfer. Called with s.mu held.
func (s *Store) transfer(key, from, to string, ttl time.Duration) (dlock.Grant, error) {
	e, err := s.owned(key, from)
	if err != nil {
		return dlock.Grant{}, err
	}
	if e.holds != 1 {
		return dlock.Grant{}, fmt.Errorf("%w: %q is held more than once by its owner: not transferable", dlock.ErrInvalid, key)
	}
	s.fence++
	e.token, e.fence, e.expires = to, s.fence, s.now().Add(ttl)
	return dlock.Grant{Fence: e.fence, Holds: 1, TTL: ttl}, nil
}
