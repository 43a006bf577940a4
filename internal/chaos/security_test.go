package chaos_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/internal/testcert"
	"example.com/dlock/redisstore"
)

// lockRoundTrip exercises every store operation the library uses, including
// contention (the waiter subscribes to the release channel).
func lockRoundTrip(ctx context.Context, rdb *redis.Client) error {
	s, err := redisstore.New(rdb, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	c, err := dlock.New(s, dlock.WithAutoRenew(600*time.Millisecond))
	if err != nil {
		return err
	}
	l, err := c.Lock(ctx, "acl-key")
	if err != nil {
		return err
	}
	got := make(chan error, 1)
	go func() {
		l2, err := c.Lock(ctx, "acl-key", dlock.WithWait(5*time.Second))
		if err == nil {
			err = l2.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond) // hold across one renewal (every TTL/3)
	if err := l.Extend(ctx, time.Second); err != nil {
		return err
	}
	if _, err := s.Inspect(ctx, "acl-key"); err != nil {
		return err
	}
	if err := l.Release(ctx); err != nil {
		return err
	}
	return <-got
}

// R23. Invariant: the library needs only its own key prefix and a handful
// of commands. Fault: an ACL user limited to ~dlock:* and &dlock:* with
// just those commands. Pass: all lock operations work; a foreign key is
// NOPERM, directly and from a script; the unrestricted default user can
// read it (the check can fail).
func TestACLLeastPrivilege(t *testing.T) {
	srv, admin := newRedis(t)
	ctx := testCtx(t, time.Minute)
	rules := []string{"ACL", "SETUSER", "locker", "on", ">s3cret", "resetkeys", "~dlock:*", "resetchannels", "&dlock:*", "-@all",
		"+evalsha", "+eval", "+script|load", "+subscribe", "+unsubscribe", "+ping", "+hello",
		// commands the Lua scripts run (ACLs apply inside scripts too)
		"+set", "+get", "+time", "+pexpire", "+pttl", "+publish"}
	if _, err := srv.DoContext(ctx, rules...); err != nil {
		t.Fatal(err)
	}
	if err := admin.Set(ctx, "payroll", "secret", 0).Err(); err != nil {
		t.Fatal(err)
	}
	opts := clientOptions(srv.Addr())
	opts.Username, opts.Password = "locker", "s3cret"
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := lockRoundTrip(ctx, rdb); err != nil {
		t.Fatalf("lock operations as the restricted user: %v", err)
	}
	denied := []error{
		rdb.Get(ctx, "payroll").Err(),
		rdb.Del(ctx, "payroll").Err(),
		rdb.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"payroll"}).Err(),
		rdb.FlushAll(ctx).Err(),
	}
	for i, err := range denied {
		if err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("foreign operation %d as the restricted user: %v, want NOPERM", i, err)
		}
	}
	if v, err := admin.Get(ctx, "payroll").Result(); err != nil || v != "secret" {
		t.Fatalf("control: default user reads %q, %v", v, err)
	}
	t.Logf("RESULT acl lock-ops=ok foreign-denied=%d/%d", len(denied), len(denied))
}

// writeTLSFiles writes a test authority and a server certificate for
// 127.0.0.1 into dir (internal/testcert) and returns them.
func writeTLSFiles(t *testing.T, dir string) *testcert.Set {
	t.Helper()
	set, err := testcert.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// startTLSRedis runs a redis-server that listens only on TLS (--port 0) and
// returns its address; it is killed when the test ends.
func startTLSRedis(t *testing.T, set *testcert.Set, dir string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("redis-server", "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", set.ServerCert, "--tls-key-file", set.ServerKey,
		"--tls-ca-cert-file", set.CA, "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Skipf("redis-server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	rdb := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: &tls.Config{RootCAs: set.Pool(), MinVersion: tls.VersionTLS12}})
	defer rdb.Close()
	if !poll(10*time.Second, func() bool { return rdb.Ping(context.Background()).Err() == nil }) {
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		t.Fatalf("TLS redis-server not ready:\n%s", log)
	}
	return addr
}

// R24. Invariant: with a TLS-only server the library works over rediss://
// and nothing travels in plaintext. Pass: lock operations work through a
// rediss:// URL trusting the test CA; a plaintext client and a client that
// does not trust the CA both fail.
func TestTLSOnly(t *testing.T) {
	dir := t.TempDir()
	certs := writeTLSFiles(t, dir)
	addr := startTLSRedis(t, certs, dir)
	ctx := testCtx(t, time.Minute)
	opts, err := redis.ParseURL("rediss://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	opts.TLSConfig.RootCAs = certs.Pool()
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := lockRoundTrip(ctx, rdb); err != nil {
		t.Fatalf("lock operations over TLS: %v", err)
	}
	plain := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: time.Second, DialTimeout: time.Second})
	defer plain.Close()
	perr := plain.Ping(ctx).Err()
	untrusted, _ := redis.ParseURL("rediss://" + addr)
	untrusted.MaxRetries = -1
	u := redis.NewClient(untrusted)
	defer u.Close()
	uerr := u.Ping(ctx).Err()
	var ue x509.UnknownAuthorityError
	t.Logf("RESULT tls lock-ops=ok plaintext=%v untrusted=%v", perr, uerr)
	if perr == nil || uerr == nil || !errors.As(uerr, &ue) {
		t.Fatalf("plaintext %v, untrusted CA %v: want both refused", perr, uerr)
	}
}
