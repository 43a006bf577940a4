package etcdstore_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"example.com/dlock"
	"example.com/dlock/etcdstore"
	"example.com/dlock/memstore"
)

// TestNewLimiterUnsupported: etcd has no clock a limiter can decide on
// (docs/ratelimit.md, "Why not etcd"), so NewLimiter on an etcdstore fails
// with an error matching errors.ErrUnsupported, before any I/O: the store's
// client points at a port nobody listens on, and the answer is still that
// one. The control is the same call on a store that is a
// driver.RateLimiter (memstore), which returns a Limiter.
func TestNewLimiterUnsupported(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close() // nobody listens there now: any I/O would fail, not answer
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{dead}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	s, err := etcdstore.New(cli, etcdstore.Options{Prefix: "lim/"})
	if err != nil {
		t.Fatal(err)
	}
	lim := dlock.RateLimit{Rate: 5, Period: time.Second, Burst: 5}
	l, err := dlock.NewLimiter(s, lim)
	if !errors.Is(err, errors.ErrUnsupported) || errors.Is(err, dlock.ErrUnavailable) || l != nil {
		t.Fatalf("NewLimiter(etcdstore) = %v, %v; want nil and an error matching errors.ErrUnsupported", l, err)
	}
	if !strings.Contains(err.Error(), "*etcdstore.Store") {
		t.Errorf("the error %q does not name the store", err)
	}
	// An invalid limit on etcd is still unsupported: the store is checked first.
	if _, err := dlock.NewLimiter(s, dlock.RateLimit{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("NewLimiter(etcdstore, zero limit) = %v, want errors.ErrUnsupported", err)
	}
	if l, err := dlock.NewLimiter(memstore.New(nil), lim); err != nil || l == nil {
		t.Fatalf("control: NewLimiter(memstore) = %v, %v", l, err)
	}
}
