package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/testcert"
	"example.com/dlock/internal/urltest"
	"example.com/dlock/mysqlstore"
	"github.com/go-sql-driver/mysql"
)

// TestOpenURL opens both modes from mysql:// URLs on the shared server
// (migrate=1 creates the schema), takes and releases a key through each,
// and checks that Describe hides the password.
func TestOpenURL(t *testing.T) {
	s := shared(t)
	table := uniqTable(t)
	for _, mode := range []string{"lease", "session"} {
		o, err := driver.Open(ctxT(t), s.URL()+"?migrate=1&table="+table+"&mode="+mode)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if strings.Contains(o.Describe, "dlock-test") || !strings.Contains(o.Describe, "mode "+mode) {
			t.Fatalf("Describe %q", o.Describe)
		}
		g, err := o.Store.(driver.Mutex).Acquire(ctxT(t), "k", "tok", time.Second)
		if err != nil || g.Fence == 0 {
			t.Fatalf("%s acquire: %+v %v", mode, g, err)
		}
		if err := o.Store.(driver.Mutex).Release(ctxT(t), "k", "tok"); err != nil {
			t.Fatal(err)
		}
		if _, isSession := o.Store.(*mysqlstore.Session); isSession != (mode == "session") {
			t.Fatalf("%s opened a %T", mode, o.Store)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenURLInvalid: malformed URLs are ErrInvalid before any I/O.
func TestOpenURLInvalid(t *testing.T) {
	for _, u := range []string{
		"mysql:///db", "mysql://h:99999/db", "mysql://h/", "mysql://h/a/b",
		"mysql://h/db?mode=queue", "mysql://h/db?table=1bad", "mysql://h/db?nope=1",
		"mysql://h/db?max-conns=0", "mysql://h/db?migrate=maybe", "mysql://h/db?table=a&table=b",
		"mysql://h/db?max-conns=2", "mysql://h/db?mode=lease&max-conns=2", // max-conns is the session lock's
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := driver.Open(ctx, u)
		cancel()
		if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", u, err)
		}
	}
}

// TestOpenURLRefused: a server that refuses the user (a wrong password, a
// database the user cannot use) is ErrRefused when the URL is opened (the
// CLI's exit 77, "authentication failed"), not a connection error that
// retrying could fix. The control: an address where nothing listens matches
// neither ErrRefused nor ErrInvalid.
func TestOpenURLRefused(t *testing.T) {
	s := shared(t)
	good, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	wrongPassword, noDB := *good, *good
	wrongPassword.User = url.UserPassword(good.User.Username(), "not-the-password")
	noDB.Path = "/no_such_database"
	for name, u := range map[string]string{"wrong password": wrongPassword.String(), "no such database": noDB.String()} {
		o, err := driver.Open(ctxT(t), u)
		if err == nil {
			_ = o.Close()
			t.Fatalf("%s: opened", name)
		}
		if !errors.Is(err, driver.ErrRefused) || strings.Contains(err.Error(), "not-the-password") {
			t.Errorf("%s: %v, want ErrRefused without the password", name, err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := *good
	closed.Host = l.Addr().String()
	_ = l.Close()
	_, err = driver.Open(ctxT(t), closed.String()+"?dial-timeout=2s")
	if err == nil || errors.Is(err, driver.ErrRefused) || errors.Is(err, driver.ErrInvalid) {
		t.Errorf("nothing listening: %v, want an unclassified connection error", err)
	}
}

// TestConnConfig: ConnConfig gives the configuration Open connects with
// (port 3306 by default, dial-timeout, TLS from the files, the table
// prefix), a pool made from it reaches the server, and it refuses what
// Open refuses with ErrInvalid.
func TestConnConfig(t *testing.T) {
	certs := testcert.ForTest(t)
	u, _ := url.Parse("mysql://u:p@db.example/app?table=billing&dial-timeout=3s&mode=session&cacert=" + url.QueryEscape(certs.CA))
	cfg, opts, err := mysqlstore.ConnConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "db.example:3306" || cfg.User != "u" || cfg.Passwd != "p" || cfg.DBName != "app" ||
		cfg.Timeout != 3*time.Second || cfg.TLS == nil || !cfg.ParseTime || !cfg.InterpolateParams || opts.Table != "billing" {
		t.Errorf("ConnConfig(%s) = %+v, %+v", u.Redacted(), cfg, opts)
	}
	for _, bad := range []string{"mysql://h/db?tls=maybe", "mysql://h/db?cacert=/no/such/file", "mysql://h/db?nope=1", "mysql://h/"} {
		u, _ := url.Parse(bad)
		if _, _, err := mysqlstore.ConnConfig(u); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", bad, err)
		}
	}
	s := shared(t)
	su, _ := url.Parse(s.URL())
	cfg, _, err = mysqlstore.ConnConfig(su)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	if err := db.PingContext(ctxT(t)); err != nil {
		t.Errorf("a pool made from ConnConfig: %v", err)
	}
}

// TestOpenURLMaxConns: max-conns=N is the session lock's MaxConns. With 1,
// the one connection holding a key leaves none for a queued wait on it,
// which fails at once with ErrConnLimit; with 2 (the control) the wait gets
// its own connection and blocks in GET_LOCK until its context ends.
func TestOpenURLMaxConns(t *testing.T) {
	s := shared(t)
	table := uniqTable(t)
	for _, n := range []int{1, 2} {
		o, err := driver.Open(ctxT(t), s.URL()+"?migrate=1&mode=session&table="+table+"&max-conns="+strconv.Itoa(n))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.Store.(driver.Mutex).Acquire(ctxT(t), "k", "holder", time.Second); err != nil {
			t.Fatal(err)
		}
		q, ok := driver.As[driver.Queuer](o.Store)
		if !ok {
			t.Fatal("the session lock has no Queuer")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err = q.AcquireQueued(ctx, "k", "waiter", time.Second)
		cancel()
		if limited := errors.Is(err, mysqlstore.ErrConnLimit); limited != (n == 1) || err == nil {
			t.Errorf("max-conns=%d: a queued wait behind a holder: %v; want ErrConnLimit only with 1", n, err)
		}
		if err := o.Store.(driver.Mutex).Release(ctxT(t), "k", "holder"); err != nil {
			t.Fatal(err)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenUnknownParameter: an unknown parameter, one of the other mode
// and a repeated one are refused before any connection, naming it.
func TestOpenUnknownParameter(t *testing.T) {
	urltest.Refuses(t, "mysql://u:secret@127.0.0.1:1/db?tabel=x", "tabel", `unknown parameter "tabel"`, "table, tls")
	urltest.Refuses(t, "mysql://u:secret@127.0.0.1:1/db?max-conns=2", "max-conns", "applies to mode=session, not to mode=lease")
	urltest.Refuses(t, "mysql://u:secret@127.0.0.1:1/db?table=a&table=b", "table", "given 2 times")
	urltest.Refuses(t, "mysql://u:secret@127.0.0.1:1/db?cacert=/nonexistent", "cacert", "no such file")
}
