package pgstore_test

import (
	"context"
	"testing"

	"example.com/dlock/internal/pgbouncer"
	"github.com/jackc/pgx/v5/pgxpool"
)

// bouncer starts a PgBouncer in mode in front of the package's server,
// stopped when the test ends (skipped without pgbouncer, failed under
// CI=true).
func bouncer(t *testing.T, mode pgbouncer.Mode) *pgbouncer.Bouncer {
	t.Helper()
	return pgbouncer.Start(t, server(t), pgbouncer.Options{Mode: mode})
}

// bouncedPool returns a pool through b configured as docs/postgres.md says
// for a pooler (default_query_exec_mode=exec: no named prepared statements,
// which PgBouncer 1.18 cannot carry from one transaction to the next), with
// at most maxConns connections (0: pgx's default), closed when the test
// ends.
func bouncedPool(t testing.TB, b *pgbouncer.Bouncer, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(b.URL() + "&default_query_exec_mode=exec")
	if err != nil {
		t.Fatal(err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
