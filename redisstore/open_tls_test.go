package redisstore_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testcert"
)

// TestOpenTLSFiles: rediss:// takes cacert=, cert= and key= (the forms
// etcds:// and mysql:// take), so a URL alone reaches a server whose
// certificate a private authority signed and that asks for a client
// certificate (--tls-auth-clients yes): it locks. The controls, on the same
// TLS port: no cacert= (the system's roots), another authority's cacert=,
// and no client certificate are all refused; the files on redis:// and
// cacert= with skip_verify=true are ErrInvalid before any I/O.
func TestOpenTLSFiles(t *testing.T) {
	certs, other := testcert.ForTest(t), testcert.ForTest(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	redisserver.Start(t, redisserver.WithArgs("--tls-port", port, "--tls-cert-file", certs.ServerCert,
		"--tls-key-file", certs.ServerKey, "--tls-ca-cert-file", certs.CA, "--tls-auth-clients", "yes"))
	base := "rediss://127.0.0.1:" + port + "/?max_retries=-1&dial_timeout=2s&"
	files := url.Values{"cacert": {certs.CA}, "cert": {certs.ClientCert}, "key": {certs.ClientKey}}
	ctx := testCtx(t)
	if err := faulttest.OpenAndLock(ctx, base+files.Encode(), "k"); err != nil {
		t.Fatalf("rediss:// with the authority and a client certificate: %v", err)
	}
	for name, q := range map[string]url.Values{
		"system roots":          {"cert": {certs.ClientCert}, "key": {certs.ClientKey}},
		"another authority":     {"cacert": {other.CA}, "cert": {certs.ClientCert}, "key": {certs.ClientKey}},
		"no client certificate": {"cacert": {certs.CA}},
	} {
		cctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		err := faulttest.OpenAndLock(cctx, base+q.Encode(), "k")
		cancel()
		if err == nil {
			t.Errorf("%s: locked on a server that should refuse it", name)
		}
	}
	for _, u := range []string{
		"redis://127.0.0.1:" + port + "?" + url.Values{"cacert": {certs.CA}}.Encode(),
		"redis+cluster://127.0.0.1:" + port + "?" + url.Values{"cert": {certs.ClientCert}, "key": {certs.ClientKey}}.Encode(),
		base + url.Values{"cacert": {certs.CA}, "skip_verify": {"true"}}.Encode(),
		base + url.Values{"cert": {certs.ClientCert}}.Encode(),
		base + url.Values{"cacert": {"/no/such/file"}}.Encode(),
	} {
		if _, err := driver.Open(ctx, u); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", u, err)
		}
	}
}
