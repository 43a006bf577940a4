package pgstore_test

import (
	"context"
	"testing"
	"time"

	"example.com/dlock/internal/faulttest"
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

// sessServer returns the package's shared server (TestMain) with the
// schema for the default prefix.
func sessServer(t testing.TB) *pgserver.Server {
	t.Helper()
	s := server(t)
	sessMigrate(t, sessPool(t, s.URL(), 2))
	return s
}

// sessOwnServer starts a server of the test's own (for tests that kill or
// restart it) with the schema for the default prefix.
func sessOwnServer(t testing.TB) *pgserver.Server {
	t.Helper()
	s := pgserver.Start(t)
	sessMigrate(t, sessPool(t, s.URL(), 2))
	return s
}

// sessMigrate creates the schema for the default prefix (pgstore.Migrate).
func sessMigrate(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pgstore.Migrate(ctx, pool, pgstore.Options{}); err != nil {
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

// tctx is ctx under a name that the tests' local ctx variables do not
// shadow.
func tctx(t testing.TB) context.Context { return ctx(t) }

// Child processes: the test binary started by roles.Start or
// roles.Command runs one registered role from init, before TestMain (which
// would start a server), and exits with its outcome (status 1 and the
// error on stderr).
var roles = faulttest.NewRoles("PGSTORE_CHILD_ROLE")

func init() { roles.Run() }
