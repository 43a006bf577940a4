package redlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/internal/urltest"
	"example.com/dlock/redlock"
)

// TestParseURLForms parses both node forms and the store's parameters.
func TestParseURLForms(t *testing.T) {
	nodes, prefix, opts, err := redlock.ParseURL("redlock://u:pw@a:1,b:2,c:3?prefix=p:&node-timeout=80ms&drift-factor=0.02&fencing=false&dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 || prefix != "p:" || opts.NodeTimeout.String() != "80ms" || opts.DriftFactor != 0.02 || !opts.DisableFencing {
		t.Fatalf("host list: %d nodes, prefix %q, %+v", len(nodes), prefix, opts)
	}
	for i, want := range []string{"a:1", "b:2", "c:3"} {
		o := nodes[i]
		if o.Addr != want || o.Username != "u" || o.Password != "pw" || o.DialTimeout.String() != "2s" || o.MaxRetries != -1 || !o.ContextTimeoutEnabled {
			t.Errorf("node %d: %+v", i, o)
		}
	}
	nodes, prefix, opts, err = redlock.ParseURL("redlock://?node=redis://x:1/2&node=rediss://u:pw@y:2&node=z:3")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 || prefix != "" || opts.DisableFencing || nodes[0].DB != 2 || nodes[1].TLSConfig == nil || nodes[1].Password != "pw" || nodes[2].Addr != "z:3" {
		t.Fatalf("node= form: %+v %+v %+v", nodes[0], nodes[1], nodes[2])
	}
}

// TestOpenRejectsBadURLs: ErrInvalid, the problem named, no password shown.
func TestOpenRejectsBadURLs(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"redlock://", "names no node"},
		{"redlock://u:hunter2@a:1,,c:3", "empty host"},
		{"redlock://u:hunter2@a:1,b:99999", "1-65535"},
		{"redlock://u:hunter2@a:1?node=redis://b:2", "not both"},
		{"redlock://?node=redis://u:hunter2@b:2&dial_timeout=1s", "each node URL"},
		{"redlock://?node=redis://u:hunter2@b:2?prefix=x", "belong to the redlock URL"},
		{"redlock://?node=redis://a:1?fair=true&node=redis://b:2&node=redis://c:3", "not offered on Redlock"},
		{"redlock://u:hunter2@a:1/0", "path"},
		{"redlock://u:hunter2@a:1?node-timeout=-1s", "node-timeout"},
		{"redlock://u:hunter2@a:1?drift-factor=0.7", "drift-factor"},
		{"redlock://u:hunter2@a:1?fencing=maybe", "fencing"},
		{"redlock://u:hunter2@a:1?bogus=1", "bogus"},
		{"redlock://?node=http://u:hunter2@b:2", "scheme"},
	} {
		op, err := driver.Open(testCtx(t), tc.raw)
		if err == nil {
			_ = op.Close()
			t.Errorf("%s: opened", tc.raw)
			continue
		}
		if !errors.Is(err, driver.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: want ErrInvalid naming %q without the password, got %v", tc.raw, tc.want, err)
		}
	}
}

// TestOpenLocksOnThreeServers opens redlock:// over three real servers,
// locks through it and finds the lock on every node; Describe has no
// password.
func TestOpenLocksOnThreeServers(t *testing.T) {
	ctx := testCtx(t)
	srvs := redisserver.StartN(t, 3)
	var hosts []string
	for _, s := range srvs {
		if _, err := s.Do("ACL", "SETUSER", "locker", "on", ">hunter2", "~*", "&*", "+@all"); err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, s.Addr())
	}
	op, err := driver.Open(ctx, "redlock://locker:hunter2@"+strings.Join(hosts, ",")+"?prefix=rl:")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := op.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	if strings.Contains(op.Describe, "hunter2") || !strings.Contains(op.Describe, hosts[2]) || !strings.Contains(op.Describe, "3 nodes") {
		t.Errorf("Describe %q", op.Describe)
	}
	rs, ok := op.Store.(*redlock.Store)
	if !ok {
		t.Fatalf("store is %T", op.Store)
	}
	l, err := newClient(t, rs).TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returns once a majority granted; the third node's grant may
	// still be on its way (it is kept when it comes).
	for _, s := range srvs {
		waitFor(t, 5*time.Second, s.Addr()+" to hold rl:{k}", func() bool {
			v, err := s.Do("EXISTS", "rl:{k}")
			return err == nil && v == "1"
		})
	}
	if _, err := newClient(t, op.Store.(driver.Mutex)).TryLock(ctx, "k"); err == nil {
		t.Error("a second owner got a held lock")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestOpenUnknownParameter: a parameter neither the store's nor go-redis'
// and a repeated one are refused before any connection, naming it.
func TestOpenUnknownParameter(t *testing.T) {
	urltest.Refuses(t, "redlock://u:secret@a:1,b:2,c:3?node_timeout=1s", "node_timeout", `unknown parameter "node_timeout"`, "drift-factor, fencing, node, node-timeout, prefix; ")
	urltest.Refuses(t, "redlock://a:1,b:2,c:3?fencing=true&fencing=false", "fencing", "given 2 times")
}

// TestOpenRefusesDuplicateNodes: a server named twice (in either form,
// whatever the database or the case of the host) would vote twice; it is
// refused with ErrInvalid before any connection, naming the two nodes.
// The control: three distinct servers open.
func TestOpenRefusesDuplicateNodes(t *testing.T) {
	for _, raw := range []string{
		"redlock://u:secret@A:1,A:1,A:1",
		"redlock://a:1,b:2,A:1",
		"redlock://?node=redis://a:1/0&node=b:2&node=redis://u:secret@a:1/3",
	} {
		_, err := driver.Open(testCtx(t), raw)
		if !errors.Is(err, driver.ErrInvalid) || !strings.Contains(err.Error(), "same server") || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: %v; want ErrInvalid naming the same server", raw, err)
		}
	}
	op, err := driver.Open(testCtx(t), "redlock://a:1,b:1,c:1")
	if err != nil {
		t.Fatalf("three distinct servers: %v", err)
	}
	_ = op.Close()
}
