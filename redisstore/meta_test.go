package redisstore_test

import (
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit/clienttest"
	"example.com/dlock/redisstore"
)

func TestMetaIsKeptWithTheHoldingAndShownByInspectAndList(t *testing.T) {
	_, rdb := newRedis(t)
	c := newClient(t, rdb, dlock.WithMeta("host=a pid=1 cmd=job"))
	s := c.Store().(*redisstore.Store)
	ctx := testCtx(t)
	lock, _ := s.Keys("m")

	l, err := c.Lock(ctx, "m", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Inspect(ctx, "m")
	if err != nil || info.Meta != "host=a pid=1 cmd=job" || !info.Held {
		t.Fatalf("Inspect = %+v, %v; want the metadata", info, err)
	}
	if strings.Contains(info.Meta, l.Token()) {
		t.Fatal("metadata contains the token")
	}
	var listed driver.Info
	if err := s.List(ctx, "m", func(key string, i driver.Info) bool { listed = i; return true }); err != nil || listed.Meta != info.Meta {
		t.Fatalf("List: %+v, %v; want the metadata", listed, err)
	}

	// An extension gives the metadata the lock's new expiry.
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if d := rdb.PTTL(ctx, lock+":meta").Val(); d < 30*time.Second {
		t.Fatalf("meta key PTTL %v after extending to 1m", d)
	}
	clienttest.Release(t, l)
	if info, _ := s.Inspect(ctx, "m"); info.Meta != "" {
		t.Fatalf("released: Meta = %q", info.Meta)
	}

	// A holding without metadata writes none and shows none, even while the
	// previous holding's meta key still lives (its fence is not the lock's).
	l, err = c.Lock(ctx, "m", dlock.WithMeta(""))
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Inspect(ctx, "m"); info.Meta != "" || !info.Held {
		t.Fatalf("no metadata: Inspect = %+v", info)
	}
	if rdb.Exists(ctx, lock+":meta").Val() != 1 {
		t.Fatal("control: the previous holding's meta key should still live")
	}
	clienttest.Release(t, l)
	if n := rdb.Exists(ctx, "x-nometa:meta").Val(); n != 0 {
		t.Fatal("unexpected key")
	}
}

func TestMetaSurvivesReentryAndReadsWithTheGrant(t *testing.T) {
	_, rdb := newRedis(t)
	c := newClient(t, rdb)
	s := c.Store().(*redisstore.Store)
	ctx := dlock.ContextWithOwner(testCtx(t), dlock.NewOwner())
	rdb.Set(ctx, "stock:{r}", "7", 0)

	l1, err := c.Lock(ctx, "r", dlock.WithMeta("first"), dlock.WithRead("stock:{r}"))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := l1.Value(); !ok || v != "7" {
		t.Fatalf("Value = %q, %t", v, ok)
	}
	l2, err := c.Lock(ctx, "r", dlock.WithMeta("second"), dlock.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Inspect(ctx, "r"); info.Meta != "first" || info.Holds != 2 {
		t.Fatalf("after a re-entry Inspect = %+v, want the first metadata", info)
	}
	lock, _ := s.Keys("r")
	if d := rdb.PTTL(ctx, lock+":meta").Val(); d < 30*time.Minute {
		t.Fatalf("meta key PTTL %v after a re-entry lengthened the lock to 1h", d)
	}
	clienttest.Release(t, l2)
	clienttest.Release(t, l1)

	// Without metadata, no meta key is written at all.
	clienttest.Release(t, clienttest.MustLock(t, c, ctx, "plain"))
	plain, _ := s.Keys("plain")
	if rdb.Exists(ctx, plain+":meta").Val() != 0 {
		t.Fatal("a holding without metadata wrote a meta key")
	}
}

// A transfer (the Client's local handoff) starts a holding with a new
// fence, which the meta key does not carry: the metadata is dropped, as
// docs/api.md says.
func TestMetaIsDroppedByATransfer(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	if _, err := s.Acquire(driver.WithMeta(ctx, "m"), "t", "tok-from-0123456789", time.Minute); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Inspect(ctx, "t"); info.Meta != "m" {
		t.Fatalf("before the transfer: Meta %q", info.Meta)
	}
	if _, err := s.Transfer(ctx, "t", "tok-from-0123456789", "tok-to-0123456789", time.Minute); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Inspect(ctx, "t"); info.Meta != "" || !info.Held {
		t.Fatalf("after the transfer: Inspect = %+v, want held without metadata", info)
	}
}
