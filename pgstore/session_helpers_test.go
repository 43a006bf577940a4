package pgstore_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/internal/pgserver"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sessPool returns a pool of at most maxConns connections to url, closed
// when the test ends.
func sessPool(t testing.TB, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// sessServer starts a server with the schema for the default prefix.
func sessServer(t testing.TB) *pgserver.Server {
	t.Helper()
	srv := pgserver.Start(t)
	sessMigrate(t, sessPool(t, srv.URL(), 2))
	return srv
}

// sessMigrate creates the schema the session and row-lock modes use.
func sessMigrate(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, `CREATE SEQUENCE IF NOT EXISTS dlock_fence AS bigint MINVALUE 1 NO CYCLE;
		CREATE TABLE IF NOT EXISTS dlock_rows (name text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
}

// newSession returns a session store on pool, closed when the test ends.
func newSession(t testing.TB, pool *pgxpool.Pool, opts pgstore.SessionOptions) *pgstore.SessionStore {
	t.Helper()
	s, err := pgstore.NewSession(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// tctx returns a context that ends with the test or after a minute.
func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
