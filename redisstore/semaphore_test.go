package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Tests of the semaphore's Redis layout; the rules themselves are checked
// by the conformance suite (TestConformance/Semaphore/...).

// TestSemaphoreKeysShareTheLocksSlot, on a real Cluster (CLUSTER KEYSLOT
// needs one): every key of a semaphore is in its lock's slot, so its
// multi-key scripts never meet CROSSSLOT.
func TestSemaphoreKeysShareTheLocksSlot(t *testing.T) {
	_, rdb := newCluster(t)
	s := newStore(t, rdb)
	for _, key := range []string{"a", "a}b", "x{y}z", "stock:10000", "ünï"} {
		lock, _ := s.Keys(key)
		h, z := s.SemaphoreKeys(key)
		want, err := rdb.ClusterKeySlot(testCtx(t), lock).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT: %v", err)
		}
		for _, k := range []string{h, z, h + ":rel:tok", h + ":released"} {
			if got, _ := rdb.ClusterKeySlot(testCtx(t), k).Result(); got != want {
				t.Fatalf("key %q: %s is in slot %d, the lock in %d", key, k, got, want)
			}
		}
	}
}

// A value that is not a semaphore where its hash would be is refused
// (ErrRefused) and left as it was; a key starting with '}' is refused
// before any I/O.
func TestSemaphoreRefusesForeignValues(t *testing.T) {
	srv, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	if _, err := s.AcquirePermits(ctx, "}x", "tok", 2, 1, time.Second); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("AcquirePermits(\"}x\") = %v, want ErrInvalid", err)
	}
	if n, _ := srv.Do("DBSIZE"); n != "0" {
		t.Fatalf("DBSIZE = %s after a rejected key", n)
	}
	h, z := s.SemaphoreKeys("foreign")
	if err := rdb.Set(ctx, h, "not a semaphore", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquirePermits(ctx, "foreign", "tok", 2, 1, time.Minute); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("AcquirePermits over a string = %v, want ErrRefused", err)
	}
	if _, err := s.ExtendPermits(ctx, "foreign", "tok", time.Minute); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("ExtendPermits over a string = %v, want ErrRefused", err)
	}
	if v, _ := rdb.Get(ctx, h).Result(); v != "not a semaphore" {
		t.Fatalf("the foreign value became %q", v)
	}
	if n, _ := rdb.Exists(ctx, z).Result(); n != 0 {
		t.Fatal("a refused call created the expiries")
	}
}

// Both keys live until the last holding's expiry plus the retention, not
// longer: a semaphore left alone costs nothing once its holdings have
// ended; the expiries are on the server's clock.
func TestSemaphoreKeysExpireAfterTheLastHolding(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	if _, err := s.AcquirePermits(ctx, "k", "a", 3, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	g, err := s.AcquirePermits(ctx, "k", "b", 3, 2, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h, z := s.SemaphoreKeys("k")
	bound := 2*time.Minute + s.Retention()
	for _, k := range []string{h, z} {
		if d, _ := rdb.PTTL(ctx, k).Result(); d <= bound-5*time.Second || d > bound {
			t.Fatalf("PTTL(%s) = %v, want about %v (the last holding's expiry plus the retention)", k, d, bound)
		}
	}
	if err := s.ReleasePermits(ctx, "k", "b"); err != nil {
		t.Fatal(err)
	}
	if d, _ := rdb.PTTL(ctx, h).Result(); d > time.Minute+s.Retention() {
		t.Fatalf("PTTL after the longest holding's release = %v, want at most %v", d, time.Minute+s.Retention())
	}
	if err := s.ReleasePermits(ctx, "k", "a"); err != nil {
		t.Fatal(err)
	}
	if d, _ := rdb.PTTL(ctx, h).Result(); d > s.Retention() {
		t.Fatalf("PTTL with no holding left = %v, want at most the retention %v (the fence alone)", d, s.Retention())
	}
	next, err := s.AcquirePermits(ctx, "k", "c", 5, 5, time.Minute) // none out: a new limit
	if err != nil || next.Fence <= g.Fence {
		t.Fatalf("AcquirePermits after the last release = %+v, %v; want a fence above %d", next, err, g.Fence)
	}
	// With the state gone (its retention passed), fences still go up: they
	// follow the server's clock in µs.
	if err := rdb.Del(ctx, h, z).Err(); err != nil {
		t.Fatal(err)
	}
	after, err := s.AcquirePermits(ctx, "k", "d", 5, 1, time.Minute)
	if err != nil || after.Fence <= next.Fence {
		t.Fatalf("AcquirePermits after the keys were gone = %+v, %v; want a fence above %d", after, err, next.Fence)
	}
}

// TestSemaphoreResentCallsAnswerWhatTheFirstRunDid: an AcquirePermits or
// ReleasePermits whose reply is lost and that go-redis resends answers what
// its first run did (the same holding; nil), not a refusal or NotHeld, also
// when another client changed the semaphore in between.
func TestSemaphoreResentCallsAnswerWhatTheFirstRunDid(t *testing.T) {
	r := newReplayRig(t, 3)
	ctx := testCtx(t)
	if _, err := r.direct.AcquirePermits(ctx, "warm-sem", "w", 1, 1, time.Minute); err != nil { // load the scripts
		t.Fatal(err)
	}
	if _, err := r.direct.ExtendPermits(ctx, "warm-sem", "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := r.direct.InspectPermits(ctx, "warm-sem"); err != nil {
		t.Fatal(err)
	}
	if err := r.direct.ReleasePermits(ctx, "warm-sem", "w"); err != nil {
		t.Fatal(err)
	}
	used := func(want int) func() bool {
		return func() bool { info, err := r.direct.InspectPermits(ctx, "k"); return err == nil && info.Used == want }
	}
	var g driver.PermitGrant
	resent, err := r.dropFirstReply(t, func() (err error) {
		g, err = r.store.AcquirePermits(ctx, "k", "a", 3, 2, time.Minute)
		return err
	}, used(2), func() {})
	if !resent || err != nil || g.Permits != 2 || g.Used != 2 {
		t.Fatalf("resent AcquirePermits (resent %v) = %+v, %v; want the grant of 2 permits", resent, g, err)
	}
	info, _ := r.direct.InspectPermits(ctx, "k")
	if len(info.Holders) != 1 || info.Holders[0].Fence != g.Fence {
		t.Fatalf("after a resent AcquirePermits: %d holders, want one with fence %d", len(info.Holders), g.Fence)
	}
	resent, err = r.dropFirstReply(t, func() error { return r.store.ReleasePermits(ctx, "k", "a") }, used(0), func() {
		if _, err := r.direct.AcquirePermits(ctx, "k", "b", 3, 1, time.Minute); err != nil {
			t.Errorf("another client's AcquirePermits: %v", err)
		}
	})
	if !resent || err != nil {
		t.Fatalf("resent ReleasePermits (resent %v) = %v, want nil", resent, err)
	}
	if info, _ := r.direct.InspectPermits(ctx, "k"); info.Used != 1 {
		t.Fatalf("after a resent release %d permits are out, want the other client's 1", info.Used)
	}
}

// List (dlock list) reports locks only: a semaphore's keys under the same
// prefix are skipped, not reported and not an error.
func TestListSkipsSemaphores(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	if _, err := s.AcquirePermits(ctx, "sem", "a", 2, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleasePermits(ctx, "sem", "a"); err != nil { // leaves a release record too
		t.Fatal(err)
	}
	if _, err := s.AcquirePermits(ctx, "sem", "b", 2, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "lock", "c", time.Minute); err != nil {
		t.Fatal(err)
	}
	got := listAll(t, s, "")
	if len(got) != 1 || !got["lock"].Held {
		t.Fatalf("List = %v, want the lock alone", got)
	}
}
