package etcdstore_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/etcdstore"
	"go.etcd.io/etcd/api/v3/version"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestOpenURL(t *testing.T) {
	c := node(t)
	ctx := ctxT(t, 20*time.Second)
	pfx := strings.TrimSuffix(uniq(t), "/")
	o, err := driver.Open(ctx, "etcd://"+c.Members[0].Addr()+","+c.Members[0].Addr()+"/"+pfx+"?session-ttl=3s")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	s := o.Store.(*etcdstore.Store)
	if s.Prefix() != pfx+"/" || s.SessionTTL() != 3*time.Second || !strings.Contains(o.Describe, "etcd") {
		t.Fatalf("opened %q prefix %q ttl %v", o.Describe, s.Prefix(), s.SessionTTL())
	}
	a := tok()
	if _, err := s.Acquire(ctx, "u", a, time.Second); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client().Get(ctx, pfx+"/u/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 1 {
		t.Fatalf("key not under the URL's prefix: %v %v", resp, err)
	}
	if err := o.Close(); err != nil { // revokes the session: the key goes
		t.Fatal(err)
	}
	other := c.Client(t)
	if resp, err := other.Get(ctx, pfx+"/u/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("Close left the key: %v %v", resp, err)
	}
	// prefix= (the CLI's --prefix) is the key prefix verbatim.
	if o, err := driver.Open(ctx, "etcd://"+c.Members[0].Addr()+"?prefix=app:"); err != nil {
		t.Error(err)
	} else {
		if p := o.Store.(*etcdstore.Store).Prefix(); p != "app:" {
			t.Errorf("prefix=app: gives prefix %q", p)
		}
		o.Close()
	}
	for _, bad := range []string{
		"etcd:///p", "etcd://h:1/p?session-ttl=1s", "etcd://h:1/p?session-ttl=2500ms",
		"etcd://h:1/p?session-ttl=x", "etcd://h:1/p?nope=1", "etcd://h:1/p?dial-timeout=-1s",
		"etcd://h:1/p?prefix=q", "etcd://h:1?prefix=a&prefix=b",
	} {
		u, _ := url.Parse(bad)
		if _, err := etcdstore.Open(ctx, u); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", bad, err)
		}
	}
}

// An etcdctl holder (empty value) is held with an unknown token; List
// groups keys by lock name; Doctor passes on a healthy node.
func TestInspectListDoctor(t *testing.T) {
	c := node(t)
	pfx := uniq(t)
	s, cli := newStore(t, c, pfx, 0)
	ctx := ctxT(t, 20*time.Second)
	lease, err := cli.Grant(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Revoke(context.Background(), lease.ID)
	put, err := cli.Put(ctx, pfx+"ctl/694d7a", "", clientv3.WithLease(lease.ID)) // as etcdctl lock writes it
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Inspect(ctx, "ctl")
	if err != nil || !info.Held || info.Token != "" || info.Holds != 1 || info.Fence != uint64(put.Header.Revision) || info.Remaining <= 0 {
		t.Fatalf("inspect of an etcdctl holder: %+v, %v", info, err)
	}
	if _, err := s.Acquire(ctx, "ctl", tok(), time.Second); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("acquire over an etcdctl holder: %v", err)
	}
	a := tok()
	if _, err := s.Acquire(ctx, "mine", a, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, pfx+"data/x", "not a lock"); err != nil { // no lease: not a lock
		t.Fatal(err)
	}
	got := map[string]driver.Info{}
	if err := s.List(ctx, "", func(k string, in driver.Info) bool { got[k] = in; return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["mine"].Token != a || !got["ctl"].Held || got["ctl"].Token != "" {
		t.Fatalf("list: %+v", got)
	}
	checks := s.Doctor(ctx, 10*time.Second)
	names := map[string]driver.Status{}
	for _, ch := range checks {
		names[ch.Name] = ch.Status
		if ch.Status != driver.OK {
			t.Errorf("doctor %s: %v %s", ch.Name, ch.Status, ch.Detail)
		}
	}
	for _, n := range []string{"version", "quorum", "leader", "session TTL", "probe lock"} {
		if _, ok := names[n]; !ok {
			t.Errorf("doctor has no %q check: %+v", n, checks)
		}
	}
}

// When the session expires every holding of the store is lost at once, and
// the next acquisition starts a new session.
func TestSessionExpiryLosesAll(t *testing.T) {
	c := node(t)
	s, cli := newStore(t, c, uniq(t), 0)
	ctx := ctxT(t, 20*time.Second)
	a, b := tok(), tok()
	ga, err := s.Acquire(ctx, "1", a, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "2", b, time.Second); err != nil {
		t.Fatal(err)
	}
	kv, err := cli.Get(ctx, s.Prefix()+"1/", clientv3.WithFirstCreate()...)
	if err != nil || len(kv.Kvs) != 1 {
		t.Fatal(kv, err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(kv.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	res := s.ExtendBatch(ctx, []driver.ExtendRequest{{Key: "1", Token: a}, {Key: "2", Token: b}})
	for i, r := range res {
		if !errors.Is(r.Err, driver.ErrNotHeld) || !errors.Is(r.Err, driver.ErrExpired) {
			t.Fatalf("holding %d after the session expired: %+v", i, r)
		}
	}
	if err := s.Release(ctx, "1", a); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("release after expiry: %v", err)
	}
	g, err := s.Acquire(ctx, "1", a, time.Second)
	if err != nil || g.Fence <= ga.Fence || g.Holds != 1 {
		t.Fatalf("acquire after expiry: %+v, %v", g, err)
	}
	kv2, _ := cli.Get(ctx, s.Prefix()+"1/", clientv3.WithFirstCreate()...)
	if kv2.Kvs[0].Lease == kv.Kvs[0].Lease {
		t.Fatal("the new holding uses the dead session")
	}
}

// The pinned 3.6 client talks to the server the tests start (Debian's
// 3.4.23 here): every test of this package is that check; this one names
// the versions.
func TestClientServerVersions(t *testing.T) {
	cli := node(t).Client(t)
	st, err := cli.Status(ctxT(t, 5*time.Second), cli.Endpoints()[0])
	if err != nil || st.Version == "" {
		t.Fatalf("status: %+v, %v", st, err)
	}
	t.Logf("client %s, server %s", version.Version, st.Version)
	if !strings.HasPrefix(version.Version, "3.6.") {
		t.Fatalf("client %s: the package documentation pins 3.6", version.Version)
	}
}
