package main

import (
	"net"
	"net/url"
	"strings"
	"testing"

	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/internal/testcert"
)

// TestMariaDBTLSCLI: on a MariaDB that requires TLS
// (mysqlserver.StartTLS), `schema --apply` and `run` both reach it with the
// URL's cacert= (schema --apply used to connect without TLS, its own pool
// ignoring the URL's TLS parameters, and was refused), and the message names
// the database. The controls: the plaintext URL and a wrong password are
// refused by the server, exit 77 for both commands (they were 69,
// "unreachable"); nothing listening is 69.
func TestMariaDBTLSCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary against a real MariaDB")
	}
	certs := testcert.ForTest(t)
	srv := mysqlserver.StartTLS(t, certs)
	plainURL := srv.URL() + "?dial-timeout=5s"
	tlsURL := plainURL + "&" + url.Values{"cacert": {certs.CA}}.Encode()
	r := runDlock(t, nil, "schema", "--store", tlsURL, "--apply")
	if r.code != 0 || !strings.Contains(r.stdout, "schema applied on mysql "+srv.Addr()+"/dlock") {
		t.Fatalf("schema --apply over TLS: %s", r)
	}
	if r := runDlock(t, nil, "run", "--store", tlsURL, "--key", "k", "--", "true"); r.code != 0 {
		t.Errorf("run over TLS: %s", r)
	}
	u, _ := url.Parse(tlsURL)
	u.User = url.UserPassword(u.User.Username(), "not-the-password")
	for name, store := range map[string]string{"plaintext": plainURL, "wrong password": u.String()} {
		for _, args := range [][]string{{"schema", "--store", store, "--apply"}, {"run", "--store", store, "--key", "k", "--", "true"}} {
			r := runDlock(t, nil, args...)
			if r.code != ExitRefused || strings.Contains(r.stderr, "not-the-password") {
				t.Errorf("%s, %s: want exit %d (refused), without the password: %s", name, args[0], ExitRefused, r)
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := strings.Replace(tlsURL, srv.Addr(), l.Addr().String(), 1)
	_ = l.Close()
	for _, args := range [][]string{{"schema", "--store", closed, "--apply"}, {"run", "--store", closed, "--key", "k", "--", "true"}} {
		if r := runDlock(t, nil, args...); r.code != ExitUnavailable {
			t.Errorf("nothing listening, %s: want exit %d: %s", args[0], ExitUnavailable, r)
		}
	}
}
