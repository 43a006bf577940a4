package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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

// tctx returns a context that ends with the test or after a minute.
func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Child processes: the test binary started by childCommand runs one
// registered role from init, before TestMain (which would start a server),
// and exits with its outcome (status 1 and the error on stderr).
var childRoles = map[string]func() error{}

// registerChild registers a role; it runs at package variable
// initialization, before init.
func registerChild(role string, fn func() error) bool {
	childRoles[role] = fn
	return true
}

func init() {
	role := os.Getenv("PGSTORE_CHILD_ROLE")
	if role == "" {
		return
	}
	fn := childRoles[role]
	if fn == nil {
		fmt.Fprintln(os.Stderr, "child: unknown role", role)
		os.Exit(2)
	}
	if err := fn(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// childCommand returns the command running role in a child process, with
// env added to this process's environment.
func childCommand(role string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "PGSTORE_CHILD_ROLE="+role), env...)
	return cmd
}
