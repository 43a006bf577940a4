package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

// The rate limiter: one string PREFIX{K}:rate per key holding its TAT in
// µs on the server's clock (rate.lua), expiring when the TAT passes. One
// script call, one key, so it runs as it is on a Cluster (the {K} tag
// puts it in the slot of K's lock and semaphore). Calls go through the
// hot path's batcher (batch.go): concurrent decisions share round trips.

var (
	//go:embed rate.lua
	rateLua    string
	rateScript = redis.NewScript(rateLua)
	hotRate    = newHotScript(rateScript, rateLua)
)

var _ driver.RateLimiter = (*Store)(nil)

// RateKey returns the Redis key of rate limiter key. It does no I/O and does
// not validate key.
func (s *Store) RateKey(key string) string { return s.lock(key) + ":rate" }

// AllowN implements driver.RateLimiter in one script call (batched with
// other goroutines' calls as acquisitions are, see the package doc) on the
// server's clock (Redis TIME, in µs; the interval is rounded up to a µs): n of key's
// budget under limit, all or none. A denied call writes nothing; an
// admitted one sets the key's TAT, which expires (PX) when it passes. Bad
// arguments (driver.ValidateRate, a key starting with '}') match
// driver.ErrInvalid before any I/O; a done ctx returns its error. Errors of
// the server are classified as for Acquire (a value of another type at the
// key: ErrRefused); any other error leaves the outcome unknown.
func (s *Store) AllowN(ctx context.Context, key string, limit driver.RateLimit, n int) (driver.RateResult, error) {
	if err := driver.ValidateRate(key, limit, n); err != nil {
		return driver.RateResult{}, err
	}
	if err := checkKey(key); err != nil {
		return driver.RateResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.RateResult{}, err
	}
	iv := (limit.Interval() + time.Microsecond - 1) / time.Microsecond
	var buf [4]int64
	v, err := ints(s.run(ctx, hotRate, []any{nil, nil, 1, s.RateKey(key), int64(iv), limit.Burst, n}), buf[:0])
	switch {
	case err != nil:
		return driver.RateResult{}, classify(err, key)
	case len(v) != 4 || (v[0] != 0 && v[0] != int64(n)):
		return driver.RateResult{}, fmt.Errorf("redisstore: unexpected rate limiter reply %v", v)
	}
	return driver.RateResult{Allowed: int(v[0]), Remaining: int(v[1]), RetryAfter: time.Duration(v[2]) * time.Microsecond, ResetAfter: time.Duration(v[3]) * time.Microsecond}, nil
}
