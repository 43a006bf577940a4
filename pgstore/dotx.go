package pgstore

import "github.com/jackc/pgx/v5/pgxpool"

// Pool returns the pgx pool of a store made by New, or nil for one made by
// NewDB. The store keeps using it: do not close it. Package pgguard begins
// the guard's transactions on it.
func (s *Store) Pool() *pgxpool.Pool {
	if b, ok := s.db.(pgxBackend); ok {
		return b.pool
	}
	return nil
}
