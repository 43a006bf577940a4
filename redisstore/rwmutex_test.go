package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"example.com/dlock/driver"
)

// Tests of the read-write lock's Redis layout; the rules themselves are
// checked by the conformance suite (TestConformance/RWMutex/...).

// TestRWKeysShareTheLocksSlot, on a real Cluster (CLUSTER KEYSLOT needs
// one): every key of a read-write lock is in its lock's slot, so its
// multi-key scripts never meet CROSSSLOT.
func TestRWKeysShareTheLocksSlot(t *testing.T) {
	_, rdb := newCluster(t)
	s := newStore(t, rdb)
	for _, key := range []string{"a", "a}b", "x{y}z", "stock:10000", "ünï"} {
		lock, _ := s.Keys(key)
		h, z := s.RWKeys(key)
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

// A value that is not a read-write lock where its hash would be is refused
// (ErrRefused) and left as it was; a key starting with '}' is refused
// before any I/O.
func TestRWRefusesForeignValues(t *testing.T) {
	srv, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	if _, err := s.AcquireRead(ctx, "}x", "tok", time.Second); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("AcquireRead(\"}x\") = %v, want ErrInvalid", err)
	}
	if n, _ := srv.Do("DBSIZE"); n != "0" {
		t.Fatalf("DBSIZE = %s after a rejected key", n)
	}
	h, z := s.RWKeys("foreign")
	if err := rdb.Set(ctx, h, "not a lock", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireWrite(ctx, "foreign", "tok", time.Minute); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("AcquireWrite over a string = %v, want ErrRefused", err)
	}
	if _, err := s.ExtendRW(ctx, "foreign", "tok", time.Minute); !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("ExtendRW over a string = %v, want ErrRefused", err)
	}
	if v, _ := rdb.Get(ctx, h).Result(); v != "not a lock" {
		t.Fatalf("the foreign value became %q", v)
	}
	if n, _ := rdb.Exists(ctx, z).Result(); n != 0 {
		t.Fatal("a refused call created the expiries")
	}
}

// Both keys live until the last holding's expiry (or the mark's) plus the
// retention, not longer; fences keep rising once the keys are gone (the
// server's clock in µs).
func TestRWKeysExpireAfterTheLastHoldingAndMark(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	if _, err := s.AcquireRead(ctx, "k", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	g, err := s.AcquireRead(ctx, "k", "b", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h, z := s.RWKeys("k")
	bound := 2*time.Minute + s.Retention()
	for _, k := range []string{h, z} {
		if d, _ := rdb.PTTL(ctx, k).Result(); d <= bound-5*time.Second || d > bound {
			t.Fatalf("PTTL(%s) = %v, want about %v (the last holding's expiry plus the retention)", k, d, bound)
		}
	}
	for _, tok := range []string{"b", "a"} {
		if err := s.ReleaseRW(ctx, "k", tok); err != nil {
			t.Fatal(err)
		}
	}
	if d, _ := rdb.PTTL(ctx, h).Result(); d > s.Retention() {
		t.Fatalf("PTTL with no holding left = %v, want at most the retention %v (the fence alone)", d, s.Retention())
	}
	if _, err := s.AcquireRead(ctx, "m", "a", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireWrite(ctx, "m", "w", time.Minute); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("AcquireWrite with a reader = %v, want ErrNotAcquired (and a mark)", err)
	}
	mh, _ := s.RWKeys("m")
	if d, _ := rdb.PTTL(ctx, mh).Result(); d <= driver.WriterWaitTTL+s.Retention()-time.Second || d > driver.WriterWaitTTL+s.Retention() {
		t.Fatalf("PTTL with a mark outliving the reader = %v, want about %v (the mark's end plus the retention)", d, driver.WriterWaitTTL+s.Retention())
	}
	if err := rdb.Del(ctx, h, z).Err(); err != nil {
		t.Fatal(err)
	}
	after, err := s.AcquireWrite(ctx, "k", "c", time.Minute)
	if err != nil || after.Fence <= g.Fence {
		t.Fatalf("AcquireWrite after the keys were gone = %+v, %v; want a fence above %d", after, err, g.Fence)
	}
}

// TestRWResentCallsAnswerWhatTheFirstRunDid: an AcquireRead or ReleaseRW
// whose reply is lost and that go-redis resends answers what its first run
// did (the same holding; nil), not a refusal or NotHeld, also when another
// client changed the lock in between.
func TestRWResentCallsAnswerWhatTheFirstRunDid(t *testing.T) {
	r := newReplayRig(t, 3)
	ctx := testCtx(t)
	if _, err := r.direct.AcquireRead(ctx, "warm-rw", "w", time.Minute); err != nil { // load the scripts
		t.Fatal(err)
	}
	if _, err := r.direct.ExtendRW(ctx, "warm-rw", "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := r.direct.InspectRW(ctx, "warm-rw"); err != nil {
		t.Fatal(err)
	}
	if err := r.direct.ReleaseRW(ctx, "warm-rw", "w"); err != nil {
		t.Fatal(err)
	}
	readers := func(want int) func() bool {
		return func() bool { info, err := r.direct.InspectRW(ctx, "k"); return err == nil && len(info.Holders) == want }
	}
	var g driver.RWGrant
	resent, err := r.dropFirstReply(t, func() (err error) {
		g, err = r.store.AcquireRead(ctx, "k", "a", time.Minute)
		return err
	}, readers(1), func() {})
	if !resent || err != nil || g.Mode != driver.RWRead || g.Readers != 1 {
		t.Fatalf("resent AcquireRead (resent %v) = %+v, %v; want the grant of one read", resent, g, err)
	}
	resent, err = r.dropFirstReply(t, func() error { return r.store.ReleaseRW(ctx, "k", "a") }, readers(0), func() {
		if _, err := r.direct.AcquireRead(ctx, "k", "b", time.Minute); err != nil {
			t.Errorf("another client's AcquireRead: %v", err)
		}
	})
	if !resent || err != nil {
		t.Fatalf("resent ReleaseRW (resent %v) = %v, want nil", resent, err)
	}
	if info, _ := r.direct.InspectRW(ctx, "k"); len(info.Holders) != 1 || info.Holders[0].Token != "b" {
		t.Fatalf("after a resent release %d holders, want the other client's one", len(info.Holders))
	}
}

// List (dlock list) reports locks only: a read-write lock's keys under the
// same prefix are skipped, not reported and not an error.
func TestListSkipsRWLocks(t *testing.T) {
	_, rdb := newRedis(t)
	s := newStore(t, rdb)
	ctx := testCtx(t)
	if _, err := s.AcquireWrite(ctx, "rw", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseRW(ctx, "rw", "a"); err != nil { // leaves a release record too
		t.Fatal(err)
	}
	if _, err := s.AcquireRead(ctx, "rw", "b", time.Minute); err != nil {
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
