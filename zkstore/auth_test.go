package zkstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
	"example.com/dlock/zkstore"
	"github.com/go-zookeeper/zk"
)

// TestDigestAuthAndACL, on a lock root only the digest user "app" may
// create under: a zk://app:secret@ URL locks there; the same URL without
// credentials, or with a wrong password, is refused at once with
// ErrRefused (a wait does not retry it); acl=creator makes the lock node
// unreadable to a session without the credentials, while the default
// open ACL leaves it readable.
func TestDigestAuthAndACL(t *testing.T) {
	e := server(t)
	adm := admin(t)
	if err := adm.AddAuth("digest", []byte("app:secret")); err != nil {
		t.Fatal(err)
	}
	root := uniq(t)
	if _, err := adm.Create(root, nil, 0, zk.DigestACL(zk.PermAll, "app", "secret")); err != nil {
		t.Fatal(err)
	}
	hosts := strings.Join(e.Addrs(), ",")
	ctx := ctxT(t, 30*time.Second)

	for _, c := range []struct {
		name, url  string
		nodeIsOpen bool
	}{
		{"open ACL", "zk://app:secret@" + hosts + root + "/open", true},
		{"creator ACL", "zk://app:secret@" + hosts + root + "/creator?acl=creator", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dc, closeStore := openClient(t, ctx, c.url)
			defer closeStore()
			l, err := dc.Lock(ctx, "job")
			if err != nil {
				t.Fatalf("lock with credentials: %v", err)
			}
			defer l.Release(ctx)
			// the lock path: the URL's path, then the lock name
			lp := root + strings.SplitN(strings.SplitN(c.url, root, 2)[1], "?", 2)[0] + "/job"
			anon := admin(t) // no credentials
			kids, _, err := adm.Children(lp)
			if err != nil || len(kids) != 1 {
				t.Fatalf("lock path %s: %v, %v", lp, kids, err)
			}
			_, _, err = anon.Get(lp + "/" + kids[0])
			if c.nodeIsOpen && err != nil {
				t.Errorf("node with the open ACL unreadable without credentials: %v", err)
			}
			if !c.nodeIsOpen && !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("node with acl=creator read without credentials: %v, want ErrNoAuth", err)
			}
		})
	}

	for name, u := range map[string]string{
		"no credentials": "zk://" + hosts + root + "/open",
		"wrong password": "zk://app:wrong@" + hosts + root + "/open",
	} {
		t.Run(name, func(t *testing.T) {
			dc, closeStore := openClient(t, ctx, u)
			defer closeStore()
			start := time.Now()
			_, err := dc.Lock(ctx, "job2", dlock.WithWait(10*time.Second))
			if !errors.Is(err, dlock.ErrRefused) {
				t.Fatalf("lock: %v, want ErrRefused", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("a refused lock waited %v: a refusal must end the wait at once", d)
			}
		})
	}
}

// openClient opens rawURL and returns a Client on it and a func that closes
// both.
func openClient(t *testing.T, ctx context.Context, rawURL string) (*dlock.Client, func()) {
	t.Helper()
	o, err := driver.Open(ctx, rawURL)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dlock.New(o.Store.(driver.Mutex))
	if err != nil {
		o.Close()
		t.Fatal(err)
	}
	faulttest.CloseOnCleanup(t, dc)
	return dc, func() { _ = dc.Close(ctx); _ = o.Close() }
}

// Options.Auth belongs to Dial: New, which takes the caller's conn, refuses
// it rather than ignore it.
func TestNewRefusesAuth(t *testing.T) {
	_, err := zkstore.New(admin(t), zkstore.Options{SessionTimeout: 10 * time.Second, Auth: []zkstore.Auth{{Scheme: "digest", Secret: []byte("a:b")}}})
	if !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("New with Auth: %v, want ErrInvalid", err)
	}
}
