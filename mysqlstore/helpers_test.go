package mysqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/mysqlstore"
	_ "github.com/go-sql-driver/mysql"
)

// srv is the MariaDB server shared by the package's tests (bootstrap costs
// about 2 s); each test uses tables of its own prefix. Tests that kill or
// pause a server start their own (mysqlserver.Start).
var srv *mysqlserver.Server

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if !mysqlserver.Available() {
		if mysqlserver.Required() {
			fmt.Fprintln(os.Stderr, "mysqlstore tests: mariadb-server missing (CI=true: install it)")
			return 1
		}
		fmt.Fprintln(os.Stderr, "mysqlstore tests: mariadb-server missing; tests that need it skip")
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "mysqlstore-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	s, err := mysqlserver.Launch(dir)
	if s != nil {
		defer s.Kill()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv = s
	return m.Run()
}

// shared returns the shared server, or skips the test when there is none.
func shared(t testing.TB) *mysqlserver.Server {
	t.Helper()
	if srv == nil {
		t.Skip("mariadb-server not installed")
	}
	return srv
}

// openDB opens a pool on dsn, closed when the test ends.
func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(60)
	db.SetMaxIdleConns(60)
	t.Cleanup(func() { db.Close() })
	return db
}

// uniqTable returns a fresh table prefix.
func uniqTable(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// ctxT is a context bounded for one test step.
func ctxT(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// migrated opens a pool on the shared server and migrates a fresh prefix.
func migrated(t testing.TB, opts mysqlstore.Options) (*sql.DB, mysqlstore.Options) {
	t.Helper()
	db := openDB(t, shared(t).DSN())
	if opts.Table == "" {
		opts.Table = uniqTable(t)
	}
	if err := mysqlstore.Migrate(ctxT(t), db, opts); err != nil {
		t.Fatal(err)
	}
	return db, opts
}

// newStore returns a lease store on a fresh prefix of the shared server.
func newStore(t testing.TB, opts mysqlstore.Options) *mysqlstore.Store {
	t.Helper()
	db, opts := migrated(t, opts)
	s, err := mysqlstore.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// proxy starts a fault proxy to addr, closed when the test ends.
func proxy(t testing.TB, addr string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// testToken is the i-th of a few distinct test tokens.
func testToken(i int) string { return "token-" + string(rune('a'+i)) }
