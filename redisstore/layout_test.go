package redisstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock"
)

// A lock is stored as "<holds>:<owner>" (see acquire.lua). Tokens are data:
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
		var ce *dlock.ContendedError
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

// A lock left in the hash layout of earlier versions (a process of an older
// dlock holds it) is refused, not taken or shared: every call fails with
// WRONGTYPE and the hash is untouched.
func TestOldHashLayoutIsRefusedNotShared(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	lock, _ := s.Keys("old")
	if err := rdb.HSet(ctx, lock, "owner", "old-owner", "holds", "1", "fence", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.PExpire(ctx, lock, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	wrongType := func(op string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("%s on an old-layout lock = %v, want a WRONGTYPE error", op, err)
		}
	}
	_, err := s.Acquire(ctx, "old", "new-owner", time.Minute)
	wrongType("acquire", err)
	_, err = s.Extend(ctx, "old", "old-owner", time.Minute)
	wrongType("extend", err)
	wrongType("release", s.Release(ctx, "old", "old-owner"))
	_, err = s.Transfer(ctx, "old", "old-owner", "new-owner", time.Minute)
	wrongType("transfer", err)
	if owner, err := rdb.HGet(ctx, lock, "owner").Result(); err != nil || owner != "old-owner" {
		t.Fatalf("old-layout lock after the refusals: owner %q, %v", owner, err)
	}
	c, err := dlock.New(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLock(ctx, "old"); !errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("TryLock on an old-layout lock = %v, want ErrUnavailable", err)
	}
}
