package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/redisstore"
)

// locker is one library under test, bound to one go-redis client (one
// process's connection pool).
type locker interface {
	// lock blocks until key is held or ctx ends, returning the unlock.
	lock(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	close()
}

// readLocker is a locker that can read one data key with the grant and
// write it with the release, in the lock's own round trips (dlock's WithRead
// and Lease.Commit); the scenarios that fold the data access use it.
type readLocker interface {
	lockRead(ctx context.Context, key, data string) (readHold, error)
}

// readHold is a lock taken by a readLocker: the data's value at the grant,
// and two ways to unlock: commit (write value, then unlock, atomically) or
// release (no write).
type readHold struct {
	value   string
	found   bool
	commit  func(ctx context.Context, value string) error
	release func(ctx context.Context) error
}

// libNames lists the libraries in report order. The "-tuned" variants use
// the best settings we found for the peer (see BENCHMARKS.md). "dlock-noread"
// is dlock without WithRead and Commit: the critical section reads and
// writes the data itself.
var libNames = []string{"dlock", "dlock-noread", "floor", "redsync", "redsync-tuned", "redislock", "redislock-tuned"}

// extraLibs can be named in -libs but are not part of "all": variants of
// dlock that measure one lever. dlock-nobatch is dlock with
// redisstore.Options.NoBatching (every call its own round trip);
// dlock-fair is dlock on redisstore.NewFair (first come, first served,
// without WithRead, as dlock-noread).
var extraLibs = []string{"dlock-nobatch", "dlock-fair"}

// peerTTL is the lock TTL given to the libraries that need one per call.
const peerTTL = time.Second

// tuning is the retry delay range of the "-tuned" peers.
type tuning struct {
	RedsyncMin, RedsyncMax     time.Duration
	RedislockMin, RedislockMax time.Duration
}

var defaultTuning = tuning{
	RedsyncMin: 2 * time.Millisecond, RedsyncMax: 10 * time.Millisecond,
	RedislockMin: time.Millisecond, RedislockMax: 4 * time.Millisecond,
}

func newLocker(name string, rdb *redis.Client, tu tuning) (locker, error) {
	switch name {
	case "dlock", "dlock-noread", "dlock-nobatch":
		st, err := redisstore.New(rdb, &redisstore.Options{NoBatching: name == "dlock-nobatch"})
		if err != nil {
			return nil, err
		}
		c, err := dlock.New(st) // defaults: 30 s lease renewed every 10 s, fencing
		if err != nil {
			return nil, err
		}
		if name == "dlock-noread" {
			return dlockNoRead{&dlockLocker{c: c, st: st}}, nil
		}
		return &dlockLocker{c: c, st: st}, nil
	case "dlock-fair":
		st, err := redisstore.NewFair(rdb, nil)
		if err != nil {
			return nil, err
		}
		c, err := dlock.New(st)
		if err != nil {
			return nil, err
		}
		return dlockNoRead{&dlockLocker{c: c, st: st}}, nil
	case "floor":
		if err := floorDelete.Load(context.Background(), rdb).Err(); err != nil {
			return nil, err
		}
		return &floorLocker{rdb: rdb, keys: map[string]*sync.Mutex{}}, nil
	case "redsync":
		return &redsyncLocker{rs: redsync.New(goredis.NewPool(rdb))}, nil
	case "redsync-tuned":
		return &redsyncLocker{rs: redsync.New(goredis.NewPool(rdb)), opts: []redsync.Option{
			redsync.WithTries(1 << 30), // wait until the context ends
			redsync.WithRetryDelayFunc(func(int) time.Duration { return jitter(tu.RedsyncMin, tu.RedsyncMax) }),
		}}, nil
	case "redislock":
		return &redislockLocker{c: redislock.New(rdb), strategy: func() redislock.RetryStrategy {
			return redislock.ExponentialBackoff(16*time.Millisecond, time.Second) // README's advice: min ≥ 16 ms
		}, waitIsTTL: true}, nil
	case "redislock-tuned":
		return &redislockLocker{c: redislock.New(rdb), strategy: func() redislock.RetryStrategy {
			return jitterRetry{tu.RedislockMin, tu.RedislockMax}
		}}, nil
	}
	return nil, fmt.Errorf("unknown library %q", name)
}

func jitter(lo, hi time.Duration) time.Duration { return lo + mrand.N(hi-lo+1) }

type dlockLocker struct {
	c  *dlock.Client
	st interface{ Close() error } // the redisstore Store or FairStore
}

func (d *dlockLocker) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := d.c.Lock(ctx, key)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// lockRead takes the lock with dlock.WithRead(data): the data's value comes
// back in the acquire (or local handoff) reply, and Lease.Commit writes it
// in the release (or handoff) call.
func (d *dlockLocker) lockRead(ctx context.Context, key, data string) (readHold, error) {
	l, err := d.c.Lock(ctx, key, dlock.WithRead(data))
	if err != nil {
		return readHold{}, err
	}
	if !l.ValueRead() {
		_ = l.Release(ctx)
		return readHold{}, errors.New("dlock: WithRead did not read")
	}
	v, found := l.Value()
	return readHold{value: v, found: found, commit: l.Commit, release: l.Release}, nil
}

func (d *dlockLocker) close() { _ = d.st.Close() }

// dlockNoRead is dlock without the WithRead fast path (a named field, not
// an embedding, so that it does not get lockRead).
type dlockNoRead struct{ d *dlockLocker }

func (n dlockNoRead) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	return n.d.lock(ctx, key)
}

func (n dlockNoRead) close() { n.d.close() }

// floorLocker is the hand-written floor: SET NX PX, EVALSHA compare-and-
// delete, an in-process mutex per key so that local waiters queue instead of
// polling, and a jittered 1–2 ms poll between processes. No fencing, no
// renewal, no re-entry.
type floorLocker struct {
	rdb  *redis.Client
	mu   sync.Mutex
	keys map[string]*sync.Mutex
}

var floorDelete = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

func (f *floorLocker) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	f.mu.Lock()
	km := f.keys[key]
	if km == nil {
		km = &sync.Mutex{}
		f.keys[key] = km
	}
	f.mu.Unlock()
	km.Lock()
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	for {
		ok, err := f.rdb.SetNX(ctx, key, tok, peerTTL).Result()
		if err != nil {
			km.Unlock()
			return nil, err
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			km.Unlock()
			return nil, ctx.Err()
		case <-time.After(jitter(time.Millisecond, 2*time.Millisecond)):
		}
	}
	return func(ctx context.Context) error {
		defer km.Unlock()
		return floorDelete.EvalSha(ctx, f.rdb, []string{key}, tok).Err()
	}, nil
}

func (f *floorLocker) close() {}

type redsyncLocker struct {
	rs   *redsync.Redsync
	opts []redsync.Option
}

func (r *redsyncLocker) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	m := r.rs.NewMutex(key, r.opts...) // a Mutex remembers its value: one per holding
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock reported not held")
		}
		return err
	}, nil
}

func (r *redsyncLocker) close() {}

type redislockLocker struct {
	c         *redislock.Client
	strategy  func() redislock.RetryStrategy
	waitIsTTL bool // keep the library's default wait deadline (= TTL)
}

func (r *redislockLocker) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	octx := ctx
	if r.waitIsTTL {
		octx = context.WithoutCancel(ctx) // no deadline: redislock then waits at most the TTL
	}
	l, err := r.c.Obtain(octx, key, peerTTL, &redislock.Options{RetryStrategy: r.strategy()})
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (r *redislockLocker) close() {}

// jitterRetry is the tuning redislock lacks: a uniformly jittered retry.
type jitterRetry struct{ lo, hi time.Duration }

func (j jitterRetry) NextBackoff() time.Duration { return jitter(j.lo, j.hi) }
