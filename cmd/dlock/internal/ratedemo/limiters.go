package ratedemo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"example.com/dlock"
	"example.com/dlock/redisstore"
)

// key is the one budget every instance draws on (Redisson's OVERALL).
const key = "api"

// localLimiter is x/time/rate in the instance: 5 a second, burst 5, on
// the instance's own memory, so each instance has a budget of its own.
func localLimiter() func(context.Context) (bool, error) {
	l := rate.NewLimiter(rate.Every(Period/Rate), Rate)
	return func(context.Context) (bool, error) { return l.Allow(), nil }
}

// sharedLimiter is dlock.Limiter on the shared server: GCRA on the
// server's clock (Redis TIME). It takes no clock from the instance.
func sharedLimiter(rdb *redis.Client, prefix string) (func(context.Context) (bool, error), error) {
	store, err := redisstore.New(rdb, &redisstore.Options{Prefix: prefix})
	if err != nil {
		return nil, fmt.Errorf("ratedemo: %w", err)
	}
	l, err := dlock.NewLimiter(store, dlock.RateLimit{Rate: Rate, Period: Period, Burst: Rate})
	if err != nil {
		return nil, fmt.Errorf("ratedemo: %w", err)
	}
	return func(ctx context.Context) (bool, error) {
		r, err := l.Allow(ctx, key)
		return r.Allowed > 0, err
	}, nil
}

// fixedWindow is the hand-rolled limiter of many tutorials: INCR on a key
// named after the current second of the caller's clock, admitted while
// the count is at most 5. Instances whose clocks disagree count in
// different windows, so each gets the whole budget.
func fixedWindow(rdb *redis.Client, prefix string, now func() time.Time) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		k := prefix + "window:" + strconv.FormatInt(now().Truncate(Period).Unix(), 10)
		var n *redis.IntCmd
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			n = p.Incr(ctx, k)
			p.Expire(ctx, k, 2*Period)
			return nil
		})
		if err != nil {
			return false, fmt.Errorf("ratedemo: %w", err)
		}
		return n.Val() <= Rate, nil
	}
}
