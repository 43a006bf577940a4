package mysqlstore

import (
	"context"

	"example.com/dlock/driver"
)

var (
	_ driver.Schemer = (*Store)(nil)
	_ driver.Schemer = (*Session)(nil)
)

// Schema implements driver.Schemer: the package's Schema for the store's
// table prefix. It does no I/O.
func (s *Store) Schema() string { return Schema(Options{Table: s.opts.Table}) }

// Migrate implements driver.Schemer: the package's Migrate on the store's
// *sql.DB for its table prefix (idempotent; see Migrate for its errors).
func (s *Store) Migrate(ctx context.Context) error {
	return Migrate(ctx, s.db, Options{Table: s.opts.Table})
}

// Schema implements driver.Schemer: the schema of the session lock's table
// prefix (it uses only the fence sequence).
func (s *Session) Schema() string { return Schema(Options{Table: s.opts.Table}) }

// Migrate implements driver.Schemer: the package's Migrate on the session
// lock's *sql.DB for its table prefix, with the same errors.
func (s *Session) Migrate(ctx context.Context) error {
	return Migrate(ctx, s.db, Options{Table: s.opts.Table})
}
