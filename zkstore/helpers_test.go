package zkstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/zkserver"
	"example.com/dlock/zkstore"
	"github.com/go-zookeeper/zk"
)

// single is one standalone ZooKeeper shared by the tests of this package
// that do not stop it (each test uses its own root); started by TestMain
// (a JVM takes about a second to start), nil if the server is not
// installed or did not start (startErr).
var (
	single   *zkserver.Ensemble
	startErr error
)

func TestMain(m *testing.M) {
	code := func() int {
		flag.Parse()
		java, err := zkserver.Find()
		if err != nil {
			return m.Run() // server() skips (or fails under CI=true)
		}
		dir, err := os.MkdirTemp("", "zkstore-test-")
		if err != nil {
			startErr = err
			return m.Run()
		}
		defer os.RemoveAll(dir)
		start := time.Now()
		single, startErr = zkserver.Launch(java, dir, 1)
		if single != nil {
			defer single.Close()
		}
		if startErr == nil && testing.Verbose() {
			fmt.Printf("zkstore tests: standalone ZooKeeper serving after %v\n", time.Since(start).Round(time.Millisecond))
		}
		return m.Run()
	}()
	os.Exit(code)
}

// server returns the shared standalone server.
func server(t testing.TB) *zkserver.Ensemble {
	t.Helper()
	zkserver.Java(t)
	if startErr != nil {
		t.Fatalf("ZooKeeper did not start: %v", startErr)
	}
	return single
}

// uniq returns a root path of its own for a test.
func uniq(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "/t-" + hex.EncodeToString(b[:])
}

// ctxT returns a context that ends after d or with the test.
func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func tok() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// dial returns a Store connected to addrs with its own session, closed when
// the test ends.
func dial(t testing.TB, root string, timeout time.Duration, addrs ...string) *zkstore.Store {
	t.Helper()
	s, err := zkstore.Dial(ctxT(t, 20*time.Second), addrs, zkstore.Options{Root: root, RWRoot: root + "-rw", SemRoot: root + "-sem", SessionTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// proxied is a Store whose connection goes through a fault proxy of its
// own.
type proxied struct {
	*zkstore.Store
	p *faultproxy.Proxy
}

// dialProxied returns a Store connected through a new fault proxy to addr.
func dialProxied(t testing.TB, root string, timeout time.Duration, addr string) proxied {
	t.Helper()
	p, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return proxied{dial(t, root, timeout, p.Addr()), p}
}

// crash abandons the store as a crashed process would: its requests stop
// reaching the server (so go-zookeeper's close request is lost too), the
// connection is closed, and the server expires the session after its
// timeout.
func (c proxied) crash() {
	c.p.Blackhole(faultproxy.Upstream, true)
	_ = c.Store.Close()
	c.p.Close()
}

// admin returns a plain conn to the shared server, for reading what the
// store wrote.
func admin(t testing.TB) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(server(t).Addrs(), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}
