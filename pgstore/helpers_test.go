package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"example.com/dlock/internal/pgserver"
	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// srv is the package's PostgreSQL server, started by TestMain; nil when
// PostgreSQL is not installed (tests skip, or fail under CI=true).
var srv *pgserver.Server

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bins := map[string]string{}
	for _, name := range []string{"postgres", "initdb", "pg_isready"} {
		bins[name] = pgserver.Find(name)
	}
	if bins["postgres"] != "" && bins["initdb"] != "" && bins["pg_isready"] != "" {
		s, err := pgserver.Launch(bins)
		if s != nil {
			defer s.Remove()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "pgstore tests:", err)
			return 1
		}
		srv = s
	}
	return m.Run()
}

// server returns the package's server, skipping the test without one.
func server(t testing.TB) *pgserver.Server {
	t.Helper()
	if srv == nil {
		if pgserver.Required() {
			t.Fatal("PostgreSQL not installed (CI=true: install Debian's postgresql)")
		}
		t.Skip("PostgreSQL not installed; install Debian's postgresql to run this test")
	}
	if !srv.Running() {
		if err := srv.Restart(); err != nil {
			t.Fatalf("restart the shared server: %v", err)
		}
	}
	return srv
}

// newPool returns a pool on the package's server (or on addr, a proxy in
// front of it), closed when the test ends.
func newPool(t testing.TB, addr ...string) *pgxpool.Pool {
	t.Helper()
	s := server(t)
	url := s.URL()
	if len(addr) > 0 {
		url = s.URLFor(addr[0])
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// uniqTable returns a fresh table prefix, migrated, so that tests do not
// see each other's rows.
func uniqTable(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	table := "t" + hex.EncodeToString(b[:])
	if err := pgstore.Migrate(ctx(t), pool, pgstore.Options{Table: table}); err != nil {
		t.Fatal(err)
	}
	return table
}

// newStore returns a store on a migrated fresh table, closed when the test
// ends.
func newStore(t testing.TB, pool *pgxpool.Pool, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	if opts.Table == "" {
		opts.Table = uniqTable(t, pool)
	}
	s, err := pgstore.New(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(c)
	})
	return s
}

// ctx returns a context that ends with the test, or after a minute.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// tok returns a fresh token.
func tok() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
