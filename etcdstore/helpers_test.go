package etcdstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"example.com/dlock/etcdstore"
	"example.com/dlock/etcdstore/internal/etcdtest"
	"example.com/dlock/internal/faultproxy"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// single is one etcd node shared by the tests of this package that do not
// stop or partition it (each test uses its own prefix); started by
// TestMain, nil if the binary is missing or it did not start (startErr).
var (
	single   *etcdtest.Cluster
	startErr error
)

func TestMain(m *testing.M) {
	code := func() int {
		bin := etcdtest.Find("etcd")
		if bin == "" {
			return m.Run() // node skips (or fails under CI=true)
		}
		dir, err := os.MkdirTemp("", "etcdstore-test-")
		if err != nil {
			startErr = err
			return m.Run()
		}
		defer os.RemoveAll(dir)
		single, startErr = etcdtest.Launch(bin, dir, 1)
		if single != nil {
			defer single.Stop()
		}
		return m.Run()
	}()
	os.Exit(code)
}

// node returns the shared single-node server.
func node(t testing.TB) *etcdtest.Cluster {
	t.Helper()
	etcdtest.Binary(t)
	if startErr != nil {
		t.Fatalf("etcd did not start: %v", startErr)
	}
	return single
}

// newStore returns a Store on c with its own prefix and ttl, closed (its
// session revoked) when the test ends.
func newStore(t testing.TB, c *etcdtest.Cluster, prefix string, ttl time.Duration) (*etcdstore.Store, *clientv3.Client) {
	t.Helper()
	cli := c.Client(t)
	s, err := etcdstore.New(cli, etcdstore.Options{Prefix: prefix, SessionTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s, cli
}

// proxiedStore returns a Store on c with its own prefix and ttl whose
// client reaches c through a fault proxy of its own, both closed when the
// test ends (the store without a deadline of its own beyond 3 s).
func proxiedStore(t testing.TB, c *etcdtest.Cluster, prefix string, ttl time.Duration) (*etcdstore.Store, *faultproxy.Proxy) {
	t.Helper()
	p, err := faultproxy.New(c.Members[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	s, err := etcdstore.New(cli, etcdstore.Options{Prefix: prefix, SessionTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s, p
}

// uniq returns a prefix no other test uses.
func uniq(t testing.TB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return t.Name() + "-" + hex.EncodeToString(b) + "/"
}

func tok() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
