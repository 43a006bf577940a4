package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/testcert"
	"github.com/go-sql-driver/mysql"
)

// TestOpenTLS: on a MariaDB that serves TLS and refuses plaintext
// (--require-secure-transport), a mysql:// URL with cacert= locks (both
// modes), and the connection is encrypted (Ssl_cipher); tls=skip-verify
// also connects. The controls: the same URL without TLS, with tls=true
// trusting only the system's roots, and trusting another authority are all
// refused when opened.
func TestOpenTLS(t *testing.T) {
	certs := testcert.ForTest(t)
	other := testcert.ForTest(t)
	srv := mysqlserver.StartTLS(t, certs)
	base := srv.URL() + "?migrate=1&table=" + uniqTable(t) + "&dial-timeout=2s"
	ctx := ctxT(t)
	for _, mode := range []string{"lease", "session"} {
		u := base + "&mode=" + mode + "&" + url.Values{"cacert": {certs.CA}, "cert": {certs.ClientCert}, "key": {certs.ClientKey}}.Encode()
		if err := faulttest.OpenAndLock(ctx, u, "k"); err != nil {
			t.Fatalf("%s over TLS: %v", mode, err)
		}
	}
	if cipher := sslCipher(t, srv, certs); cipher == "" {
		t.Error("a connection configured as the URL's is not encrypted (Ssl_cipher empty)")
	}
	if o, err := driver.Open(ctx, base+"&tls=skip-verify"); err != nil {
		t.Errorf("tls=skip-verify: %v", err)
	} else {
		_ = o.Close()
	}
	for name, u := range map[string]string{
		"no TLS":            base,
		"system roots only": base + "&tls=true",
		"another authority": base + "&" + url.Values{"cacert": {other.CA}}.Encode(),
	} {
		o, err := driver.Open(ctx, u)
		if err == nil {
			_ = o.Close()
			t.Errorf("%s: opened a store on a server that requires TLS from its own authority", name)
			continue
		}
		t.Logf("%s: refused: %v", name, err)
	}
}

// sslCipher returns the cipher of a connection to srv made as a URL with
// cacert= makes it ("" if it is not encrypted).
func sslCipher(t *testing.T, srv *mysqlserver.Server, certs *testcert.Set) string {
	t.Helper()
	tc, err := driver.TLSFromFiles(certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User, cfg.Passwd, cfg.DBName, cfg.TLS = "tcp", srv.Addr(), mysqlserver.User, mysqlserver.Password, mysqlserver.Database, tc
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	var name, cipher string
	if err := db.QueryRowContext(ctxT(t), "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher); err != nil {
		t.Fatal(err)
	}
	return cipher
}

// TestOpenTLSInvalid: TLS parameters are checked before any I/O.
func TestOpenTLSInvalid(t *testing.T) {
	certs := testcert.ForTest(t)
	for _, q := range []string{
		"tls=maybe", "tls=false&" + url.Values{"cacert": {certs.CA}}.Encode(),
		"tls=skip-verify&" + url.Values{"cacert": {certs.CA}}.Encode(),
		url.Values{"cert": {certs.ClientCert}}.Encode(), url.Values{"cacert": {certs.Dir + "/missing.pem"}}.Encode(),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := driver.Open(ctx, "mysql://u:p@127.0.0.1:1/db?"+q)
		cancel()
		if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", q, err)
		}
	}
}
