package inventory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
)

type strategyFunc func(ctx context.Context, p Params) Answer

func (s *Service) strategy(name string) strategyFunc {
	switch name {
	case "nolock":
		return func(ctx context.Context, p Params) Answer { return s.decrement(ctx, p, nil) }
	case "local":
		return s.buyLocal
	case "v1":
		return s.buyV1
	case "v2":
		return s.buyV2
	case "v3":
		return s.buyV3
	case "v4":
		return func(ctx context.Context, p Params) Answer { return s.buyV4(ctx, p, false) }
	case "v5":
		return func(ctx context.Context, p Params) Answer { return s.buyV4(ctx, p, true) }
	case "redlock":
		return s.buyRedlock
	case "dlock":
		return s.buyDlock
	case "dlock-commit":
		return s.buyDlockCommit
	case EtcdStrategy, ZooKeeperStrategy, SQLLeaseStrategy:
		return s.buyStore(name)
	case SQLForUpdateStrategy:
		return s.buyForUpdate
	}
	return nil
}

// The articles' scripts, verbatim in logic.
var (
	// v4/v5 release: compare-and-delete.
	releaseScript = redis.NewScript(`
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
else
  return 0
end`)
	// v5 ExtendLockLifetime: note it re-creates a lock that has already
	// expired, as the article's does.
	extendScript = redis.NewScript(`
local currentVal = redis.call('get', KEYS[1])
if (currentVal == false) then
  return redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) and 1 or 0
elseif (currentVal == ARGV[1]) then
  return redis.call('pexpire', KEYS[1], ARGV[2])
else
  return -1
end`)
	// delAndTell is DEL that also returns the deleted value, so the demo can
	// count releases of someone else's lock. It deletes unconditionally,
	// exactly like the articles' DEL.
	delAndTell = redis.NewScript(`
local v = redis.call('get', KEYS[1])
redis.call('del', KEYS[1])
return v`)
	// fencedSet writes the stock only if the writer's fence is not older
	// than the last writer's: a stale dlock holder cannot overwrite.
	fencedSet = redis.NewScript(`
local cur = tonumber(redis.call('get', KEYS[2]))
if cur and tonumber(ARGV[1]) < cur then
  return 0
end
redis.call('set', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[2])
return 1`)
)

func newResourceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func leaseOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (s *Service) buyLocal(ctx context.Context, p Params) Answer {
	s.local.Lock()
	defer s.local.Unlock()
	return s.decrement(ctx, p, nil)
}

// buyV1: SETNX, then DEL in finally. A crash in between leaves the lock
// forever.
func (s *Service) buyV1(ctx context.Context, p Params) Answer {
	rdb := s.cfg.Redis
	ok, err := rdb.SetNX(ctx, LockKey, 1, 0).Result()
	if err != nil {
		return failed(err)
	}
	if !ok {
		return lockFailed()
	}
	a := s.decrement(ctx, p, nil)
	_ = sleep(ctx, p.Stall)
	rdb.Del(context.WithoutCancel(ctx), LockKey)
	return a
}

// buyV2: SET NX with an expiry, DEL in finally. The value is unused by the
// protocol (the article stores 1); a unique one lets the demo see whose
// lock the DEL removed.
func (s *Service) buyV2(ctx context.Context, p Params) Answer {
	id, refused := s.lockWithToken(ctx, leaseOr(p.Lease, ArticleLease))
	if refused != nil {
		return *refused
	}
	a := s.decrement(ctx, p, nil)
	_ = sleep(ctx, p.Stall)
	a.LeaseLost, a.ReleasedOther = s.del(ctx, id)
	return a
}

// lockWithToken is the acquire step of v2–v5: SET NX with a fresh owner
// token and the lease. It returns the token, or the answer to give when the
// lock was not taken (an error, or the articles' "could not get lock").
func (s *Service) lockWithToken(ctx context.Context, lease time.Duration) (string, *Answer) {
	id := newResourceID()
	ok, err := s.cfg.Redis.SetNX(ctx, LockKey, id, lease).Result()
	switch {
	case err != nil:
		a := failed(err)
		return "", &a
	case !ok:
		a := lockFailed()
		return "", &a
	}
	return id, nil
}

// del deletes the lock key unconditionally and reports whether the lock was
// no longer id's (lost) and whether it deleted another request's (other).
func (s *Service) del(ctx context.Context, id string) (lost, other bool) {
	v, err := delAndTell.Run(context.WithoutCancel(ctx), s.cfg.Redis, []string{LockKey}).Text()
	if errors.Is(err, redis.Nil) {
		return true, false
	}
	return err == nil && v != id, err == nil && v != id
}

// buyV3: owner token as the value; release checks with GET, then DELs. The
// check and the delete are two commands: a lease that ends between them
// lets this request delete the next holder's lock.
func (s *Service) buyV3(ctx context.Context, p Params) Answer {
	rdb := s.cfg.Redis
	id, refused := s.lockWithToken(ctx, leaseOr(p.Lease, ArticleLease))
	if refused != nil {
		return *refused
	}
	a := s.decrement(ctx, p, nil)
	rctx := context.WithoutCancel(ctx)
	if v, err := rdb.Get(rctx, LockKey).Result(); err == nil && v == id {
		_ = sleep(rctx, p.Stall)
		a.LeaseLost, a.ReleasedOther = s.del(rctx, id)
	} else {
		a.LeaseLost = true
	}
	return a
}

// buyV4 is v4 (Lua compare-and-delete), and v5 when renew is set: a timer
// extends the lock every lease/2 until the stock is written.
func (s *Service) buyV4(ctx context.Context, p Params, renew bool) Answer {
	rdb := s.cfg.Redis
	lease := leaseOr(p.Lease, ArticleLease)
	id, refused := s.lockWithToken(ctx, lease)
	if refused != nil {
		return *refused
	}
	stop := func() {}
	if renew {
		stop = every(lease/2, func() {
			ectx, cancel := context.WithTimeout(context.Background(), lease/2)
			defer cancel()
			extendScript.Run(ectx, rdb, []string{LockKey}, id, lease.Milliseconds())
		})
	}
	a := s.decrement(ctx, p, nil)
	stop() // the article disposes the timer right after the write
	_ = sleep(ctx, p.Stall)
	n, err := releaseScript.Run(context.WithoutCancel(ctx), rdb, []string{LockKey}, id).Int()
	a.LeaseLost = err == nil && n == 0
	return a
}

// every runs fn each period until the returned stop is called; stop waits
// for a running fn to finish.
func every(period time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fn()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// lockDlock takes the dlock strategies' lock with opts, renewed by the
// watchdog when p sets a lease. On failure it returns a nil lease and the
// request's answer.
func (s *Service) lockDlock(ctx context.Context, p Params, opts ...dlock.Option) (*dlock.Lease, Answer) {
	return lockWith(ctx, s.locks, p, opts...)
}

// lockWith is lockDlock on the client c.
func lockWith(ctx context.Context, c *dlock.Client, p Params, opts ...dlock.Option) (*dlock.Lease, Answer) {
	if p.Lease > 0 {
		opts = append(opts, dlock.WithAutoRenew(p.Lease))
	}
	l, err := c.Lock(ctx, LockKey, opts...)
	if err != nil {
		if errors.Is(err, dlock.ErrNotAcquired) && ctx.Err() == nil {
			return nil, lockFailed()
		}
		return nil, failed(err)
	}
	return l, Answer{}
}

// leaseLost reports whether a release failed because the lease had ended.
func leaseLost(err error) bool {
	return errors.Is(err, dlock.ErrNotHeld) || errors.Is(err, dlock.ErrLost)
}

// buyDlock uses this library: a blocking Lock with the watchdog renewing the
// lease, and a fenced write of the stock.
func (s *Service) buyDlock(ctx context.Context, p Params) Answer {
	return s.buyFenced(ctx, p, s.locks, fenceKey)
}

// buyFenced takes the lock from c (blocking, renewed by the watchdog) and
// writes the stock with the lock's fence, compared with the last one kept
// at fk (one key per lock service: their fences are not comparable).
func (s *Service) buyFenced(ctx context.Context, p Params, c *dlock.Client, fk string) Answer {
	l, refused := lockWith(ctx, c, p)
	if l == nil {
		return refused
	}
	write := func(ctx context.Context, left int64) error {
		n, err := fencedSet.Run(ctx, s.cfg.Redis, []string{StockKey, fk}, l.Fence(), left).Int()
		if err == nil && n == 0 {
			err = dlock.ErrStaleFence
		}
		return err
	}
	a := s.decrement(ctx, p, write)
	_ = sleep(ctx, p.Stall)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := l.Release(rctx); err != nil {
		a.LeaseLost = leaseLost(err)
		if a.Outcome == Sold {
			a.Message = "sold, but the release failed: " + err.Error()
		}
	}
	return a
}

// buyDlockCommit is this library's fast path for a read-modify-write: the
// stock comes back with the grant (WithRead), and the new stock is written
// by the release itself (Lease.Commit), in the same atomic step and only
// while the lock is still this request's, so a holder that lost its lock
// writes nothing. With a request of the same instance waiting, the release
// hands the lock on with the write, so a sale costs one Redis round trip.
func (s *Service) buyDlockCommit(ctx context.Context, p Params) Answer {
	l, refused := s.lockDlock(ctx, p, dlock.WithRead(StockKey))
	if l == nil {
		return refused
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	a, next := s.decideFromValue(ctx, l, p)
	if next == nil {
		if err := l.Release(rctx); err != nil {
			a.LeaseLost = leaseLost(err)
		}
		return a
	}
	_ = sleep(ctx, p.Stall)
	if err := l.Commit(rctx, strconv.FormatInt(*next, 10)); err != nil {
		msg := "nothing sold: " // the store refused the write: the lock was lost
		if errors.Is(err, dlock.ErrUnavailable) {
			msg = "sale unknown: " // the write may have landed
		}
		return Answer{Outcome: Failed, Message: msg + err.Error(), LeaseLost: errors.Is(err, dlock.ErrLost), Overlap: a.Overlap}
	}
	return a
}

// decideFromValue is the critical section of buyDlockCommit: the stock read
// with the grant, checked, and the work done. It returns the answer and the
// stock to write, or nil if nothing is to be written. The occupancy
// detector counts the section up to the decision; the write itself is the
// release's, guarded by the store.
func (s *Service) decideFromValue(ctx context.Context, l *dlock.Lease, p Params) (Answer, *int64) {
	if p.Crash && s.cfg.AllowCrash {
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL) // no release runs
	}
	rdb := s.cfg.Redis
	inside, err := rdb.Incr(ctx, occupancyKey).Result()
	if err != nil {
		return failed(err), nil
	}
	defer rdb.Decr(context.WithoutCancel(ctx), occupancyKey)
	v, found := l.Value()
	var cur int64
	if found {
		if cur, err = strconv.ParseInt(v, 10, 64); err != nil {
			return failed(err), nil
		}
	}
	if cur < 1 {
		return Answer{Outcome: OutOfStock, Left: cur, Message: "out of stock", Overlap: inside > 1}, nil
	}
	if err := sleep(ctx, p.Work); err != nil {
		return failed(err), nil
	}
	left := cur - 1
	return Answer{Outcome: Sold, Left: left, Overlap: inside > 1}, &left
}
