package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/internal/chaos/check"
	"example.com/dlock/internal/chaos/history"
	"example.com/dlock/redisstore"
)

// app is one recorded lock client: every lock operation and resource write
// it makes lands in rec.
type app struct {
	rec    *history.Recorder
	locks  *dlock.Client
	rdb    *redis.Client // the protected resource's connection
	client int
	ghosts int
	seen   *holdings // if set, a refusal looks at the holding that caused it
}

// tryLock makes one recorded attempt. A contended attempt is a definite
// failure; anything else that failed (timeout, broken connection, late
// grant) may have taken effect on the server, so it is recorded as unknown
// under a ghost token that nobody will release.
func (a *app) tryLock(ctx context.Context, key string, ttl time.Duration) (*dlock.Lease, error) {
	op := a.rec.Invoke(a.client, history.Acquire, key)
	op.TTL = ttl
	l, err := a.locks.TryLock(ctx, key, dlock.WithTTL(ttl))
	switch {
	case err == nil:
		op.Token, op.Fence, op.ValidUntil = history.TokenID(l.Token()), l.Fence(), history.Mono(l.ValidUntil())
		a.rec.Finish(op, history.Ok)
	case isContended(err):
		op.Token, op.Err = fmt.Sprintf("fail-%d-%d", a.client, a.ghosts), check.Contended
		a.ghosts++
		a.rec.Finish(op, history.Failed)
		if a.seen != nil {
			a.seen.look(context.WithoutCancel(ctx), key)
		}
	default:
		op.Token, op.Err = fmt.Sprintf("ghost-%d-%d", a.client, a.ghosts), err.Error()
		a.ghosts++
		a.rec.Finish(op, history.Unknown)
	}
	return l, err
}

func isContended(err error) bool {
	var ce *driver.ContendedError
	return errors.As(err, &ce) && !errors.Is(err, dlock.ErrUnavailable) &&
		!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// release records l's release. A release the lease refused locally (it had
// already expired) never reached the store and is not an operation.
func (a *app) release(ctx context.Context, l *dlock.Lease) error {
	op := a.rec.Invoke(a.client, history.Release, l.Key())
	op.Token, op.TTL, op.ValidUntil = history.TokenID(l.Token()), l.Remaining(), history.Mono(l.ValidUntil())
	err := l.Release(ctx)
	switch {
	case err == nil:
		a.rec.Finish(op, history.Ok)
	case errors.Is(err, dlock.ErrNotHeld):
		op.Err = err.Error()
		a.rec.Finish(op, history.Failed)
	case errors.Is(err, dlock.ErrLost) && !errors.Is(err, dlock.ErrUnavailable):
		// expired locally: no store call was made
	default:
		op.Err = err.Error()
		a.rec.Finish(op, history.Unknown)
	}
	return err
}

// The protected resource: a fenced register {value, fence} in Redis. A read
// also registers the reader's fence, so that a holder paused between its
// read and its write cannot write back a value computed from a state a newer
// holder has since changed (fencing only the write would let a stale write
// land between the newer holder's read and write). Fence 0 means unfenced.
var fencedRead = redis.NewScript(`
local f = tonumber(redis.call('HGET', KEYS[1], 'fence')) or 0
local mine = tonumber(ARGV[1])
if mine > 0 and mine < f then return {0, 0} end
if mine > f then redis.call('HSET', KEYS[1], 'fence', mine) end
return {1, tonumber(redis.call('HGET', KEYS[1], 'value')) or 0}`)

var errStaleRead = errors.New("stale fence on read")

func readStock(ctx context.Context, rdb *redis.Client, res string, fence uint64) (int64, error) {
	v, err := fencedRead.Run(ctx, rdb, []string{res}, fence).Int64Slice()
	if err != nil {
		return 0, err
	}
	if v[0] == 0 {
		return 0, fmt.Errorf("%w: %w", dlock.ErrStaleFence, errStaleRead)
	}
	return v[1], nil
}

// write records a write of value to res with fence (0: unfenced).
func (a *app) write(ctx context.Context, res, req string, value int64, fence uint64) error {
	op := a.rec.Invoke(a.client, history.Write, res)
	op.Fence, op.Value, op.ReqID = fence, value, req
	var err error
	if fence == 0 {
		err = a.rdb.HSet(ctx, res, "value", value).Err()
	} else {
		err = redisstore.SetFenced(ctx, a.rdb, res, strconv.FormatInt(value, 10), fence)
	}
	switch {
	case err == nil:
		a.rec.Finish(op, history.Ok)
	case errors.Is(err, dlock.ErrStaleFence):
		op.Err = "stale fence"
		a.rec.Finish(op, history.Failed)
	default:
		op.Err = err.Error()
		a.rec.Finish(op, history.Unknown)
	}
	return err
}

// stockConfig is one worker's share of the seed's inventory scenario.
type stockConfig struct {
	Lock, Res string
	TTL       time.Duration
	NoLock    bool // the negative control: no lock at all
	Unfenced  bool // write without the fence
	Deadline  time.Time
	Seed      uint64
}

// stockWorker sells until the stock is gone or the deadline passes: lock →
// fenced read → a little work → fenced write of stock−1 → release.
func (a *app) stockWorker(ctx context.Context, cfg stockConfig) {
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(a.client)))
	for n := 0; time.Now().Before(cfg.Deadline) && n < 10000; n++ {
		var l *dlock.Lease
		var fence uint64
		if !cfg.NoLock {
			var err error
			if l, err = a.tryLock(ctx, cfg.Lock, cfg.TTL); err != nil {
				// Client backoff, jittered; longer when the store failed, so
				// an outage adds few indeterminate operations.
				d := time.Duration(2+rng.IntN(10)) * time.Millisecond
				if !isContended(err) {
					d = time.Duration(50+rng.IntN(100)) * time.Millisecond
				}
				time.Sleep(d)
				continue
			}
			if !cfg.Unfenced {
				fence = l.Fence()
			}
		}
		more := a.sell(ctx, cfg, fmt.Sprintf("c%d-r%d", a.client, n), fence, rng)
		if l != nil {
			_ = a.release(ctx, l)
		}
		if !more {
			return
		}
	}
}

// sell is one request's critical section; it reports false once sold out.
func (a *app) sell(ctx context.Context, cfg stockConfig, req string, fence uint64, rng *rand.Rand) bool {
	stock, err := readStock(ctx, a.rdb, cfg.Res, fence)
	if err != nil {
		return true
	}
	if stock <= 0 {
		return false
	}
	time.Sleep(time.Duration(500+rng.IntN(2000)) * time.Microsecond) // the service's work between read and write
	_ = a.write(ctx, cfg.Res, req, stock-1, fence)
	return true
}
