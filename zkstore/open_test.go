package zkstore_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faultproxy"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/internal/urltest"
	"example.com/dlock/internal/zkserver"
	"example.com/dlock/zkstore"
	"github.com/go-zookeeper/zk"
)

// TestOpenURL: the zk:// scheme is registered; a URL names the servers,
// the root and the session timeout, and the store it opens takes locks
// there; Close ends the session (its node is deleted at once).
func TestOpenURL(t *testing.T) {
	e := server(t)
	root := uniq(t)
	ctx := ctxT(t, 20*time.Second)
	o, err := driver.Open(ctx, "zk://"+strings.Join(e.Addrs(), ",")+root+"?session-timeout=4s")
	if err != nil {
		t.Fatal(err)
	}
	if m := o.Store.Model(); !m.Session || m.SessionTTL != 4*time.Second || !m.ServerClock {
		t.Fatalf("model %+v, want a 4s session", m)
	}
	if !strings.Contains(o.Describe, "zookeeper") || !strings.Contains(o.Describe, root) {
		t.Fatalf("Describe = %q", o.Describe)
	}
	dc, err := dlock.New(o.Store.(driver.Mutex))
	if err != nil {
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, dc)
	l, err := dc.Lock(ctx, "orders/42")
	if err != nil {
		t.Fatal(err)
	}
	adm := admin(t)
	kids, _, err := adm.Children(root + "/orders/42")
	if err != nil || len(kids) != 1 || !strings.HasPrefix(kids[0], "_c_") || !strings.Contains(kids[0], "-lock-") {
		t.Fatalf("lock node under %s/orders/42: %v, %v", root, kids, err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if kids, _, _ := adm.Children(root + "/orders/42"); len(kids) != 0 {
		t.Fatalf("after Close the session's node stays: %v", kids)
	}
	_ = l
}

// TestOpenURLErrors: malformed URLs are refused with driver.ErrInvalid
// before any connection.
func TestOpenURLErrors(t *testing.T) {
	for _, raw := range []string{
		"zk:///root",
		"zk://h:1/root?session-timeout=x",
		"zk://h:1/root?session-timeout=-1s",
		"zk://h:1/root?dial-timeout=0s",
		"zk://h:1/root?bogus=1",
		"zk://h:1/a/../b",
		"zk://user@h:1/root",
		"zk://:pw@h:1/root",
		"zk://h:1/root?acl=creator",
		"zk://user:pw@h:1/root?acl=bogus",
		"zk://h:1,/root",
	} {
		_, err := driver.Open(context.Background(), raw)
		if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("Open(%q) error shows the password: %v", raw, err)
		}
	}
	if _, err := url.Parse("zk://a:1,b:2/x"); err != nil {
		t.Fatalf("net/url refuses a server list: %v", err)
	}
}

// TestNewRefusesBadOptions: bad options are refused with ErrInvalid and no
// I/O.
func TestNewRefusesBadOptions(t *testing.T) {
	conn, _, err := zk.Connect([]string{"127.0.0.1:1"}, time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for name, opts := range map[string]zkstore.Options{
		"no timeout":    {},
		"relative root": {Root: "locks", SessionTimeout: time.Second},
		"dot root":      {Root: "/a/./b", SessionTimeout: time.Second},
		"huge margin":   {SessionTimeout: time.Second, Margin: time.Second},
		"neg margin":    {SessionTimeout: time.Second, Margin: -time.Millisecond},
	} {
		if _, err := zkstore.New(conn, opts); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := zkstore.New(nil, zkstore.Options{SessionTimeout: time.Second}); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("nil conn: %v", err)
	}
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// TestNegotiatedTimeout: the store counts with the session timeout the
// server grants, not the one asked: above the server's maximum it is
// lowered (zkserver: 60s), below its minimum (2 × tickTime) raised; the
// doctor says so.
func TestNegotiatedTimeout(t *testing.T) {
	e := server(t)
	for _, c := range []struct{ ask, want time.Duration }{
		{100 * time.Second, zkserver.MaxSessionTimeout},
		{100 * time.Millisecond, 2 * zkserver.TickTime},
		{3 * time.Second, 3 * time.Second},
	} {
		s := dial(t, uniq(t), c.ask, e.Addrs()...)
		if got := s.Model().SessionTTL; got != c.want {
			t.Errorf("asked %v: model session TTL %v, want the granted %v", c.ask, got, c.want)
		}
		var st driver.Status
		for _, ch := range s.Doctor(ctxT(t, 10*time.Second), c.ask) {
			if ch.Name == "session timeout" {
				st = ch.Status
			}
		}
		if wantWarn := c.ask != c.want; (st == driver.Warn) != wantWarn {
			t.Errorf("asked %v, granted %v: doctor's session timeout check is %v", c.ask, c.want, st)
		}
	}
}

// TestDoctor: on the standalone server the checks report the version, warn
// about a single server, and take and release a probe lock; a server that
// does not answer fails the probe without hanging.
func TestDoctor(t *testing.T) {
	e := server(t)
	s := dial(t, uniq(t), 3*time.Second, e.Addrs()...)
	got := map[string]driver.Check{}
	for _, c := range s.Doctor(ctxT(t, 20*time.Second), 3*time.Second) {
		got[c.Name] = c
	}
	want := map[string]driver.Status{"version": driver.OK, "ensemble": driver.Warn, "session timeout": driver.OK,
		"session vs lease": driver.OK, "probe lock": driver.OK}
	for name, st := range want {
		if c, ok := got[name]; !ok || c.Status != st {
			t.Errorf("check %q = %+v, want status %v", name, c, st)
		}
	}
	if !strings.Contains(got["version"].Detail, "3.") || !strings.Contains(got["ensemble"].Detail, "standalone") {
		t.Errorf("details: %q, %q", got["version"].Detail, got["ensemble"].Detail)
	}
	if kids, _, _ := admin(t).Children(s.Root()); len(kids) > 1 {
		t.Errorf("the probe left %v under the root", kids)
	}

	cut := dialProxied(t, uniq(t), 3*time.Second, e.Addrs()[0])
	cut.p.Blackhole(faultproxy.Upstream, true)
	cut.p.Blackhole(faultproxy.Downstream, true)
	start := time.Now()
	got = map[string]driver.Check{}
	for _, c := range cut.Doctor(ctxT(t, 3*time.Second), 3*time.Second) {
		got[c.Name] = c
	}
	if el := time.Since(start); el > 6*time.Second {
		t.Errorf("Doctor on a cut-off server took %v", el)
	}
	if got["probe lock"].Status != driver.Fail || got["version"].Status == driver.OK {
		t.Errorf("Doctor on a cut-off server: %+v", got)
	}
}

// TestOpenUnknownParameter: an unknown parameter and a repeated one are
// refused before any connection, naming it (and the accepted ones).
func TestOpenUnknownParameter(t *testing.T) {
	urltest.Refuses(t, "zk://u:secret@127.0.0.1:1/root?sesion-timeout=4s", "sesion-timeout", "accepted: acl, dial-timeout, prefix, rw-root, sem-root, session-timeout")
	urltest.Refuses(t, "zk://127.0.0.1:1/root?sem-root=a//b", "sem-root", "absolute")
	urltest.Refuses(t, "zk://127.0.0.1:1/root?rw-root=relative", "rw-root", "absolute")
	urltest.Refuses(t, "zk://127.0.0.1:1/root?prefix=a&prefix=b", "prefix", "given 2 times")
}
