package pgstore

import (
	"context"
	"fmt"
	"strings"

	"example.com/dlock/driver"
)

var (
	_ driver.Schemer = (*Store)(nil)
	_ driver.Schemer = (*SessionStore)(nil)
)

// prefix is the table prefix the names were derived from.
func (n names) prefix() string { return strings.TrimSuffix(n.locks, "_locks") }

// Schema implements driver.Schemer: the package's Schema for the store's
// table prefix. It does no I/O.
func (s *Store) Schema() string { return Schema(Options{Table: s.names.prefix()}) }

// Migrate implements driver.Schemer: it runs the package's Migrate for the
// store's table prefix on the store's pool or *sql.DB (idempotent; see
// Migrate for the privileges it needs and its errors).
func (s *Store) Migrate(ctx context.Context) error {
	if _, err := s.db.exec(ctx, migration(s.names)); err != nil {
		return wrap("migrate", err)
	}
	return nil
}

// Schema implements driver.Schemer: the whole schema of the store's table
// prefix (the session lock uses only its fence sequence).
func (s *SessionStore) Schema() string { return Schema(Options{Table: s.table}) }

// Migrate implements driver.Schemer: the package's Migrate on the store's
// pool, for its table prefix, with the same errors.
func (s *SessionStore) Migrate(ctx context.Context) error {
	if err := Migrate(ctx, s.pool, Options{Table: s.table}); err != nil {
		return fmt.Errorf("pgstore: session store: %w", err)
	}
	return nil
}
