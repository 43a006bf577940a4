package redisstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/faulttest"
)

// A lock is stored as "<holds>:<fence>:<call id>:<owner>" (see acquire.lua). Tokens are data:
// one that looks like another's encoded value, or contains the separator,
// must not be taken for that owner by any script.
func TestTokensThatLookLikeTheLayout(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	pairs := [][2]string{{"abc", "2:abc"}, {"abc", "1:abc"}, {"2:abc", "abc"}, {"a:b", "b"}, {"x", ":x"}}
	for i, p := range pairs {
		key := "layout-" + string(rune('a'+i))
		holder, other := p[0], p[1]
		for range 2 { // the holder re-enters: its value becomes "2:" + holder
			if _, err := s.Acquire(ctx, key, holder, time.Minute); err != nil {
				t.Fatalf("%q: acquire by %q: %v", key, holder, err)
			}
		}
		var ce *driver.ContendedError
		if _, err := s.Acquire(ctx, key, other, time.Minute); !errors.As(err, &ce) {
			t.Fatalf("%q held twice by %q: acquire by %q = %v, want contended", key, holder, other, err)
		}
		if _, err := s.Extend(ctx, key, other, time.Minute); !errors.Is(err, dlock.ErrTaken) {
			t.Fatalf("%q held by %q: extend by %q = %v, want ErrTaken", key, holder, other, err)
		}
		if err := s.Release(ctx, key, other); !errors.Is(err, dlock.ErrTaken) {
			t.Fatalf("%q held by %q: release by %q = %v, want ErrTaken", key, holder, other, err)
		}
		if _, err := s.Transfer(ctx, key, other, "z", time.Minute); !errors.Is(err, dlock.ErrTaken) {
			t.Fatalf("%q held by %q: transfer from %q = %v, want ErrTaken", key, holder, other, err)
		}
		info, err := s.Inspect(ctx, key)
		if err != nil || info.Token != holder || info.Holds != 2 {
			t.Fatalf("%q: inspect = %+v, %v; want holder %q with 2 holds", key, info, err, holder)
		}
		g, err := s.Extend(ctx, key, holder, time.Minute)
		if err != nil || g.Holds != 2 || g.Fence != info.Fence {
			t.Fatalf("%q: extend by the holder = %+v, %v; want 2 holds, fence %d", key, g, err, info.Fence)
		}
		for want := 1; want >= 0; want-- {
			if err := s.Release(ctx, key, holder); err != nil {
				t.Fatalf("%q: release by the holder (%d left): %v", key, want, err)
			}
		}
		g, err = s.Acquire(ctx, key, other, time.Minute)
		if err != nil || g.Holds != 1 || g.Fence <= info.Fence {
			t.Fatalf("%q free: acquire by %q = %+v, %v; want a first hold above fence %d", key, other, g, err, info.Fence)
		}
		if err := s.Release(ctx, key, holder); !errors.Is(err, dlock.ErrTaken) {
			t.Fatalf("%q held by %q: release by %q = %v, want ErrTaken", key, other, holder, err)
		}
	}
}

// TestL6NonLockValuesAreRefused: a lock key holding something that is not
// a lock of this layout (the hash of early versions, the "<holds>:<owner>"
// string of the last one, another program's string) is refused, not taken,
// shared or reported free: every call fails with an error matching
// dlock.ErrRefused that names the key, the value is untouched, and TryLock
// ends at once with ErrRefused.
func TestL6NonLockValuesAreRefused(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	lock, _ := s.Keys("old")
	values := []func() error{
		func() error { return rdb.HSet(ctx, lock, "owner", "old-owner", "holds", "1", "fence", "1").Err() },
		func() error { return rdb.Set(ctx, lock, "1:old-owner", 0).Err() }, // the previous string layout
		func() error { return rdb.Set(ctx, lock, "hello", 0).Err() },       // another program's value
	}
	for i, set := range values {
		if err := errors.Join(rdb.Del(ctx, lock).Err(), set(), rdb.PExpire(ctx, lock, time.Minute).Err()); err != nil {
			t.Fatal(err)
		}
		before, _ := rdb.Dump(ctx, lock).Result()
		refused := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, dlock.ErrRefused) || !strings.Contains(err.Error(), `"old"`) {
				t.Errorf("value %d: %s = %v, want an error matching ErrRefused naming the key", i, op, err)
			}
		}
		_, err := s.Acquire(ctx, "old", "old-owner", time.Minute)
		refused("acquire", err)
		_, err = s.Extend(ctx, "old", "old-owner", time.Minute)
		refused("extend", err)
		refused("release", s.Release(ctx, "old", "old-owner"))
		_, err = s.Transfer(ctx, "old", "old-owner", "new-owner", time.Minute)
		refused("transfer", err)
		_, err = s.Inspect(ctx, "old")
		refused("inspect", err)
		refused("extend batch", s.ExtendBatch(ctx, []driver.ExtendRequest{{Key: "old", Token: "old-owner", TTL: time.Minute}})[0].Err)
		if after, _ := rdb.Dump(ctx, lock).Result(); after != before {
			t.Fatalf("value %d changed by the refused calls", i)
		}
		c, err := dlock.New(s)
		if err != nil {
			t.Fatal(err)
		}
		faulttest.CloseOnCleanup(t, c)
		start := time.Now()
		if _, err := c.Lock(ctx, "old", dlock.WithWait(5*time.Second)); !errors.Is(err, dlock.ErrRefused) || !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("value %d: Lock = %v, want ErrRefused and ErrNotAcquired", i, err)
		} else if el := time.Since(start); el > 2*time.Second {
			t.Fatalf("value %d: Lock waited %v on a refusal, want at once", i, el)
		}
	}
	// Negative control: a key of the current layout is not refused.
	if _, err := s.Acquire(ctx, "fresh", "t", time.Minute); err != nil {
		t.Fatalf("acquire of a free key: %v", err)
	}
}
