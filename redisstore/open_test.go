package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/redisserver"
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
	c, err := dlock.New(op.Store)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("%s: TryLock: %v", op.Describe, err)
	}
	other, _ := dlock.New(op.Store)
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
	if _, err := mustClient(t, bad.Store).TryLock(ctx, "x"); !errors.Is(err, dlock.ErrRefused) || strings.Contains(err.Error(), "wrong-pw") {
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
	return c
}

// TestOpenUsesThePrefix: a lock taken through ?prefix=app: lives under
// app:, and Close leaves a client the caller made alone.
func TestOpenUsesThePrefix(t *testing.T) {
	ctx := testCtx(t)
	srv, rdb := newRedis(t)
	op := openURL(t, srv.URL()+"?prefix=app:")
	l, err := mustClient(t, op.Store).TryLock(ctx, "p")
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
