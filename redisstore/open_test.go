package redisstore_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/testcert"
	"example.com/dlock/internal/urltest"
	"example.com/dlock/redisstore"
)

// openURL opens rawURL with driver.Open and closes it when the test ends.
func openURL(t *testing.T, rawURL string) *driver.Opened {
	t.Helper()
	op, err := driver.Open(testCtx(t), rawURL)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := op.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return op
}

// lockThrough takes and releases key through op's store and returns the
// fence; a second client must find the key held meanwhile.
func lockThrough(t *testing.T, ctx context.Context, op *driver.Opened, key string) uint64 {
	t.Helper()
	c, err := dlock.New(op.Store.(driver.Mutex))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	l, err := c.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("%s: TryLock: %v", op.Describe, err)
	}
	other, _ := dlock.New(op.Store.(driver.Mutex))
	faulttest.CloseOnCleanup(t, other)
	if _, err := other.TryLock(ctx, key); err == nil {
		t.Fatalf("%s: a second owner got a held lock", op.Describe)
	}
	f := l.Fence()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("%s: Release: %v", op.Describe, err)
	}
	return f
}

// TestOpenReachesRealServers opens a single server (with a password and a
// prefix), a Cluster and a Sentinel-managed primary by URL and locks
// through each; the prefix is the one the URL named.
func TestOpenReachesRealServers(t *testing.T) {
	ctx := testCtx(t)
	srv := redisserver.Start(t)
	if _, err := srv.Do("ACL", "SETUSER", "locker", "on", ">hunter2", "~*", "&*", "+@all"); err != nil {
		t.Fatal(err)
	}
	op := openURL(t, "redis://locker:hunter2@"+srv.Addr()+"/0?prefix=app:")
	if f := lockThrough(t, ctx, op, "single"); f == 0 {
		t.Fatal("no fence")
	}
	if strings.Contains(op.Describe, "hunter2") || !strings.Contains(op.Describe, srv.Addr()) {
		t.Errorf("Describe %q", op.Describe)
	}

	// A wrong password is an error at the first call (Open makes none),
	// a refusal that does not show the password.
	bad := openURL(t, "redis://locker:wrong-pw@"+srv.Addr())
	if _, err := mustClient(t, bad.Store.(driver.Mutex)).TryLock(ctx, "x"); !errors.Is(err, dlock.ErrRefused) || strings.Contains(err.Error(), "wrong-pw") {
		t.Errorf("wrong password: want ErrRefused, got %v", err)
	}

	cl := redisserver.StartCluster(t, 3)
	addrs := cl.Addrs()
	op = openURL(t, "redis+cluster://"+strings.Join(addrs, ","))
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} { // spread over the primaries
		lockThrough(t, ctx, op, k)
	}

	sn := redisserver.StartSentinel(t)
	op = openURL(t, "redis+sentinel://"+strings.Join(sn.SentinelAddrs(), ",")+"/"+sn.MasterName()+"?db=1")
	lockThrough(t, ctx, op, "sentinel")
	if !strings.Contains(op.Describe, sn.MasterName()) {
		t.Errorf("Describe %q", op.Describe)
	}
}

func mustClient(t *testing.T, s driver.Mutex) *dlock.Client {
	t.Helper()
	c, err := dlock.New(s)
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, c)
	return c
}

// TestOpenUsesThePrefix: a lock taken through ?prefix=app: lives under
// app:, and Close leaves a client the caller made alone.
func TestOpenUsesThePrefix(t *testing.T) {
	ctx := testCtx(t)
	srv, rdb := newRedis(t)
	op := openURL(t, srv.URL()+"?prefix=app:")
	l, err := mustClient(t, op.Store.(driver.Mutex)).TryLock(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Exists(ctx, "app:{p}").Result(); err != nil || n != 1 {
		t.Fatalf("app:{p} exists %d, %v", n, err)
	}
	if n, _ := rdb.Exists(ctx, redisstore.DefaultPrefix+"{p}").Result(); n != 0 {
		t.Fatal("the default prefix was used")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

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

// TestOpenUnknownParameter: a parameter neither the store's nor go-redis'
// (for that kind of URL), a repeated one and a TLS file on redis:// are
// refused before any connection, naming it (and the accepted ones).
func TestOpenUnknownParameter(t *testing.T) {
	urltest.Refuses(t, "redis://u:secret@127.0.0.1:1?prefx=a", "prefx", `unknown parameter "prefx"`, "fair, key, prefix, retention, waiter_lease; ", "dial_timeout")
	urltest.Refuses(t, "redis+cluster://127.0.0.1:1,127.0.0.1:2?db=1", "db", `unknown parameter "db"`)
	urltest.Refuses(t, "redis+sentinel://127.0.0.1:1/m?pool_size=1&pool_size=2", "pool_size", "given 2 times")
	urltest.Refuses(t, "redis://127.0.0.1:1?cacert=/etc/hostname", "cacert", "not a parameter of redis://")
}

// TestOpenDatabaseOutOfRange: a database number the server does not have
// (redis://…/99 on a server with 16) is the server's refusal, which
// retrying cannot fix (driver.ErrRefused, the CLI's 77), with a message
// that names the database number; the control, /1, answers.
func TestOpenDatabaseOutOfRange(t *testing.T) {
	srv := redisserver.Start(t)
	inspect := func(db string) error {
		in, _ := driver.As[driver.Inspector](openURL(t, "redis://"+srv.Addr()+"/"+db).Store)
		_, err := in.Inspect(testCtx(t), "k")
		return err
	}
	if err := inspect("1"); err != nil {
		t.Fatalf("control /1: %v", err)
	}
	if err := inspect("99"); !errors.Is(err, driver.ErrRefused) || !strings.Contains(err.Error(), "database number") {
		t.Fatalf("/99: %v; want ErrRefused naming the database number", err)
	}
}
