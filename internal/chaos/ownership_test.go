package chaos_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/chaos/check"
	"example.com/dlock/internal/chaos/history"
	"example.com/dlock/internal/redisserver"
	"example.com/dlock/redisstore"
)

// lockRedisKey is the Redis key of lockKey's lock (default prefix).
const lockRedisKey = "dlock:{" + lockKey + "}"

// staleRelease is R17: A's key is lost behind its back (PEXPIRE 1, what a
// clock jump or eviction looks like), B takes the lock, then A — still
// believing it holds — releases; C tries. It returns A's release error, the
// overlaps in the history and whether B still holds.
func staleRelease(t *testing.T, wrap func(*redisstore.Store, *redis.Client) driver.Mutex) (error, int, bool) {
	_, rdb := newRedis(t)
	ctx := testCtx(t, time.Minute)
	var rec history.Recorder
	var w func(*redisstore.Store) driver.Mutex
	if wrap != nil {
		w = func(s *redisstore.Store) driver.Mutex { return wrap(s, rdb) }
	}
	a := newApp(t, &rec, 1, rdb, nil, w)
	b := newApp(t, &rec, 2, rdb, nil, nil)
	c := newApp(t, &rec, 3, rdb, nil, nil)
	la, err := a.tryLock(ctx, lockKey, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.PExpire(ctx, lockRedisKey, time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	var lb *dlock.Lease
	if !poll(time.Second, func() bool { lb, err = b.tryLock(ctx, lockKey, 5*time.Second); return err == nil }) {
		t.Fatal("B never got the lost key")
	}
	rerr := a.release(ctx, la)
	lc, cerr := c.tryLock(ctx, lockKey, 5*time.Second)
	if cerr == nil {
		_ = c.release(ctx, lc)
	}
	ops := rec.Ops()
	// A's window is cut at its release: the key loss itself is R-keyloss's
	// subject; here only what the release does counts.
	return rerr, len(check.MutualExclusion(ops[1:])), lb.Err() == nil && cerr != nil
}

// R17. Fault: a release by a token that no longer holds the lock (after
// key loss and re-grant). Invariant: it changes nothing. Pass: ErrNotHeld
// (ErrTaken), B still holds, C is refused, zero overlaps among B and C.
func TestReleaseOnlyByOwner(t *testing.T) {
	err, overlaps, bHolds := staleRelease(t, nil)
	t.Logf("RESULT release-by-non-owner err=%v overlaps=%d b-holds=%v", err, overlaps, bHolds)
	if !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrTaken) || overlaps != 0 || !bHolds {
		t.Fatalf("stale release: err %v, overlaps %d, B holds %v", err, overlaps, bHolds)
	}
}

// Negative control for R17: a store whose release ignores the owner deletes
// B's lock and C overlaps B.
func TestReleaseNegativeControlTokenCheckRemoved(t *testing.T) {
	_, overlaps, bHolds := staleRelease(t, func(s *redisstore.Store, rdb *redis.Client) driver.Mutex { return releaseAnyStore{s, rdb} })
	t.Logf("RESULT release-control overlaps=%d b-holds=%v", overlaps, bHolds)
	if overlaps == 0 || bHolds {
		t.Fatal("release without the token check is not detected")
	}
}

// R18. Fault: extending a lock whose key was deleted behind the holder's
// back, and one now held by another owner. Invariant: Extend never
// re-creates a key. Pass: ErrLost/ErrExpired and no key; ErrLost/ErrTaken
// and B's token unchanged.
func TestExtendDoesNotResurrect(t *testing.T) {
	resurrected, err := extendLost(t, nil)
	t.Logf("RESULT extend-after-loss err=%v resurrected=%v", err, resurrected)
	if resurrected || !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrExpired) {
		t.Fatalf("extend after loss: err %v, key re-created %v", err, resurrected)
	}
}

// Negative control for R18: setNX-on-extend brings the lock back.
func TestExtendNegativeControlResurrects(t *testing.T) {
	resurrected, _ := extendLost(t, func(s *redisstore.Store) driver.Mutex { return resurrectStore{s} })
	if !resurrected {
		t.Fatal("a resurrecting extend is not detected")
	}
}

func extendLost(t *testing.T, wrap func(*redisstore.Store) driver.Mutex) (bool, error) {
	_, rdb := newRedis(t)
	ctx := testCtx(t, time.Minute)
	var rec history.Recorder
	a := newApp(t, &rec, 1, rdb, nil, wrap)
	l, err := a.locks.TryLock(ctx, lockKey, dlock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, lockRedisKey).Err(); err != nil {
		t.Fatal(err)
	}
	eerr := l.Extend(ctx, 5*time.Second)
	n, _ := rdb.Exists(ctx, lockRedisKey).Result()
	if wrap == nil {
		// Held by another owner: extend must not touch it.
		b := newApp(t, &rec, 2, rdb, nil, nil)
		lb, err := b.locks.TryLock(ctx, lockKey, dlock.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := redisstore.New(rdb, nil)
		if _, err := s.Extend(ctx, lockKey, l.Token(), 5*time.Second); !errors.Is(err, dlock.ErrTaken) {
			t.Errorf("extend by a non-owner: %v, want ErrTaken", err)
		}
		if i, _ := s.Inspect(ctx, lockKey); i.Token != lb.Token() {
			t.Error("extend by a non-owner changed the holder")
		}
		_ = lb.Release(ctx)
	}
	return n == 1, eerr
}

// Key loss. Fault: DEL of the lock key behind an auto-renewed holder, then
// another client takes the lock. Invariant: the holder learns of the loss
// at its next renewal, and its fenced write is rejected. The lock alone
// cannot keep the windows apart here, and the checker must see that.
// Pass: loss signalled within renewal period + slack; the stale write is
// rejected; the mutual-exclusion checker reports the overlap.
func TestKeyLossDetectedAndFenced(t *testing.T) {
	ttl := 900 * time.Millisecond
	_, rdb := newRedis(t)
	_, res := newRedis(t)
	ctx := testCtx(t, time.Minute)
	var rec history.Recorder
	a := newApp(t, &rec, 1, rdb, res, nil)
	b := newApp(t, &rec, 2, rdb, res, nil)
	op := rec.Invoke(1, history.Acquire, lockKey)
	la, err := a.locks.Lock(ctx, lockKey, dlock.WithAutoRenew(ttl))
	if err != nil {
		t.Fatal(err)
	}
	op.Token, op.Fence, op.TTL, op.ValidUntil = history.TokenID(la.Token()), la.Fence(), ttl, history.Mono(la.ValidUntil())
	rec.Finish(op, history.Ok)
	stock, err := readStock(ctx, res, resKey, la.Fence())
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, lockRedisKey).Err(); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	lb, err := b.tryLock(ctx, lockKey, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	bStock, _ := readStock(ctx, res, resKey, lb.Fence())
	_ = b.write(ctx, resKey, "b", bStock-1, lb.Fence())
	select {
	case <-la.Done():
	case <-time.After(ttl/3 + slack):
		t.Fatal("holder not told of the key loss within one renewal period")
	}
	signalled := time.Since(deleted)
	werr := a.write(ctx, resKey, "a", stock-1, la.Fence())
	_ = b.release(ctx, lb)
	ops := rec.Ops()
	me, fw := check.MutualExclusion(ops), check.AcceptedWrites(ops)
	t.Logf("RESULT key-loss signalled-after=%v err=%v stale-write=%v overlaps=%d fenced-write-violations=%d", signalled, la.Err(), werr, len(me), len(fw))
	if !errors.Is(la.Err(), dlock.ErrTaken) || !errors.Is(werr, dlock.ErrStaleFence) || len(fw) != 0 || len(me) == 0 {
		t.Fatalf("key loss: lease err %v, stale write %v, fenced %v, overlaps %v", la.Err(), werr, fw, me)
	}
}

// R12. Fault: SIGKILL of the only Redis mid-run and restart, with
// appendfsync always and without persistence. Invariant: fences of new
// holdings strictly increase. Pass: zero regressions with AOF always, and
// without persistence too: fences are max(last + 1, the server's TIME in
// µs), so a server that lost its keys still hands out larger ones (as long
// as its clock does not step back; see the redisstore package doc).
func TestFenceMonotonicAcrossServerRestart(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []redisserver.Option
		want bool // regression expected
	}{{"aof-always", []redisserver.Option{redisserver.WithAOF(true)}, false}, {"no-persistence", nil, false}} {
		t.Run(c.name, func(t *testing.T) {
			srv, rdb := newRedis(t, c.opts...)
			ctx := testCtx(t, time.Minute)
			var rec history.Recorder
			a := newApp(t, &rec, 1, rdb, nil, nil)
			grants := 0
			for round := range 2 {
				for range 20 {
					l, err := a.tryLock(ctx, lockKey, time.Second)
					if err == nil {
						grants++
						_ = a.release(ctx, l)
					}
				}
				if round == 0 {
					srv.Kill()
					if err := srv.RestartProcess(); err != nil {
						t.Fatal(err)
					}
				}
			}
			v := check.FenceOrder(rec.Ops())
			t.Logf("RESULT fence-restart %s grants=%d regressions=%d", c.name, grants, len(v))
			if grants < 30 || (len(v) > 0) != c.want {
				t.Fatalf("%s: %d grants, fence violations %v", c.name, grants, v)
			}
		})
	}
}
