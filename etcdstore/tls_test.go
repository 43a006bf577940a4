package etcdstore_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	"example.com/dlock/internal/etcdserver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/testcert"
)

// TestOpenTLS: an etcds:// URL locks on a server that serves clients over
// TLS only and requires a client certificate. The controls show that TLS
// is what makes it work: the same server refuses a plain etcd:// client, a
// client without a certificate and a client that trusts another authority.
func TestOpenTLS(t *testing.T) {
	etcdserver.Binary(t)
	certs := testcert.ForTest(t)
	c := etcdserver.StartTLS(t, certs)
	addr := c.Members[0].Addr()
	q := url.Values{"cacert": {certs.CA}, "cert": {certs.ClientCert}, "key": {certs.ClientKey}}
	ctx := ctxT(t, 30*time.Second)

	o, err := driver.Open(ctx, "etcds://"+addr+"/tls?session-ttl=3s&"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	cl, err := dlock.New(o.Store.(driver.Mutex))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, cl)
	l, err := cl.Lock(ctx, "k")
	if err != nil {
		t.Fatalf("lock over TLS: %v", err)
	}
	if _, err := cl.TryLock(ctx, "k"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("second lock of a held key over TLS: %v, want ErrNotAcquired", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.Close(ctx); err != nil {
		t.Fatal(err)
	}

	other := testcert.ForTest(t)
	for name, u := range map[string]string{
		"plain etcd://":      "etcd://" + addr + "/tls?dial-timeout=1s",
		"no client cert":     "etcds://" + addr + "/tls?dial-timeout=1s&" + url.Values{"cacert": {certs.CA}}.Encode(),
		"another authority":  "etcds://" + addr + "/tls?dial-timeout=1s&" + url.Values{"cacert": {other.CA}, "cert": {other.ClientCert}, "key": {other.ClientKey}}.Encode(),
		"server not trusted": "etcds://" + addr + "/tls?dial-timeout=1s&" + url.Values{"cacert": {other.CA}, "cert": {certs.ClientCert}, "key": {certs.ClientKey}}.Encode(),
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // the etcd client retries a refused handshake until then
			err := faulttest.OpenAndLock(ctx, u, "k2")
			cancel()
			if err == nil {
				t.Fatalf("%s locked on a TLS server that requires a client certificate from its authority", name)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// The TLS parameters are checked before any connection: on etcd:// they are
// refused, cert and key go together, and the files must hold what they
// claim. Each such URL gets ErrInvalid.
func TestOpenTLSBadParameters(t *testing.T) {
	dir := t.TempDir()
	certs, err := testcert.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 10*time.Second)
	for _, q := range []url.Values{
		{"cert": {certs.ClientCert}},
		{"key": {certs.ClientKey}},
		{"cacert": {filepath.Join(dir, "missing.pem")}},
		{"cacert": {junk}},
		{"cert": {certs.ClientCert}, "key": {junk}},
	} {
		u, _ := url.Parse("etcds://127.0.0.1:1/p?" + q.Encode())
		if _, err := etcdstore.Open(ctx, u); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", u, err)
		}
	}
	u, _ := url.Parse("etcd://127.0.0.1:1/p?" + url.Values{"cacert": {certs.CA}}.Encode())
	if _, err := etcdstore.Open(ctx, u); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("cacert on etcd://: %v, want ErrInvalid", err)
	}
}
