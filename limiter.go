package dlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"example.com/dlock/driver"
)

// RateLimit is a limit of Rate requests per Period, of which Burst may come
// at once. It is the same type as driver.RateLimit.
type RateLimit = driver.RateLimit

// RateResult is the answer to Allow and AllowN: Allowed (n or 0),
// Remaining, RetryAfter (0 if admitted) and ResetAfter. It is the same type
// as driver.RateResult.
type RateResult = driver.RateResult

// Limiter admits requests under a rate limit shared by every process that
// uses the same store (driver.RateLimiter): GCRA on the store's clock, so
// that processes with skewed clocks get the same answers. It is safe for
// concurrent use and holds no per-key state of its own; create one per
// limit and share it. Stores that implement driver.RateLimiter today:
// memstore, redisstore, and the lease tables of pgstore and mysqlstore;
// not etcdstore, which has no clock to decide on (docs/ratelimit.md).
//
// Who shares a budget is the choice of key: one key for everyone is one
// budget overall (Redisson's OVERALL), a key per client (its address, its
// user) is a budget per client (PER_CLIENT), both under the Limiter's one
// limit. Keys are the store's, so two Limiters (in one process or many)
// with the same prefix and key draw on one budget, each with its own limit
// (see SetLimit).
type Limiter struct {
	store  driver.RateLimiter
	prefix string
	obs    Observer

	mu    sync.Mutex
	limit RateLimit
}

// LimiterOption configures a Limiter.
type LimiterOption func(*Limiter)

// WithKeyPrefix puts prefix in front of every key of the Limiter, so that
// limiters of different purposes on one store keep apart budgets for the
// same key ("login:" and "api:" for the same user). Default: none.
func WithKeyPrefix(prefix string) LimiterOption {
	return func(l *Limiter) { l.prefix = prefix }
}

// WithLimiterObserver makes o observe the Limiter's decisions and waits
// (EventLimitDecision; EventWaitStart and EventWaitEnd of Kind KindLimit
// for WaitN): as WithObserver for the lock primitives. A nil o observes
// nothing, at no cost. Default: none.
func WithLimiterObserver(o Observer) LimiterOption {
	return func(l *Limiter) { l.obs = o }
}

// NewLimiter returns a Limiter on store under limit. Before any I/O, it
// returns an error matching ErrInvalid if store is nil or limit is not
// valid (driver.ValidateRateLimit: Rate >= 1, Period > 0, Burst >= 1, at
// most a million a second, a burst that comes back within a year), and one
// matching errors.ErrUnsupported if store is not a driver.RateLimiter: a
// store with no clock a limiter can read (etcdstore, zkstore;
// docs/ratelimit.md says why).
func NewLimiter(store driver.Store, limit RateLimit, opts ...LimiterOption) (*Limiter, error) {
	if store == nil {
		return nil, invalidf("nil store")
	}
	rl, ok := store.(driver.RateLimiter)
	if !ok {
		return nil, driver.Unsupported("rate limiter", fmt.Sprintf("the store (%T) keeps no clock a limiter can decide on: it is not a driver.RateLimiter", store))
	}
	if err := driver.ValidateRateLimit(limit); err != nil {
		return nil, err
	}
	l := &Limiter{store: rl, limit: limit}
	for _, o := range opts {
		o(l)
	}
	return l, nil
}

// Limit returns the limit the next call uses.
func (l *Limiter) Limit() RateLimit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit
}

// SetLimit changes the limit: every call that starts after it returns uses
// the new one. Keys keep their state (the time already charged, on the
// store): raising the burst admits at once what the larger burst allows,
// and lowering the rate does not forgive what was admitted under the old
// one. Other processes keep their own limit until they change it. An
// invalid limit returns an error matching ErrInvalid and changes nothing.
func (l *Limiter) SetLimit(limit RateLimit) error {
	if err := driver.ValidateRateLimit(limit); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limit = limit
	return nil
}

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (RateResult, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN admits n requests of key at once if its budget has room for all
// of them, in one store call. Admitted or denied (Allowed is n or 0,
// RetryAfter says when to try again), the error is nil; a denied call
// changes nothing. Bad arguments (a key ValidateKey refuses, alone or
// with the prefix, n < 1, n above the burst: *driver.BurstExceededError) return an
// error matching ErrInvalid before any I/O. Any other error is the store's:
// matching ErrUnavailable or ErrRefused, or ctx's; one matching no sentinel
// leaves unknown whether the n were charged.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (RateResult, error) {
	err := driver.ValidateKey(key)
	var r RateResult
	var start time.Time
	if err == nil {
		if l.obs != nil {
			start = time.Now()
		}
		r, err = l.store.AllowN(ctx, l.prefix+key, l.Limit(), n)
	}
	if err != nil {
		err = tidy(fmt.Errorf("dlock: rate limiter %q: %w", key, err))
		r = RateResult{}
	}
	if l.obs != nil {
		l.decided(ctx, key, n, start, r, err)
	}
	return r, err
}

// Wait is WaitN(ctx, key, 1).
func (l *Limiter) Wait(ctx context.Context, key string) error {
	return l.WaitN(ctx, key, 1)
}

// WaitN waits until n requests of key are admitted at once, asking again
// after each denial's RetryAfter. Waiters are not queued: one that wakes
// may lose to a request that came later. It returns at once, charging
// nothing, with an error matching ErrInvalid when the arguments are bad (n
// above the burst can never be admitted), and with one matching both
// ErrNotAcquired and context.DeadlineExceeded when the next try would come
// after ctx's deadline. It returns ctx's error if ctx ends while it waits,
// and the store's error, as AllowN's, if a call fails.
func (l *Limiter) WaitN(ctx context.Context, key string, n int) error {
	if l.obs == nil {
		return l.waitN(ctx, key, n)
	}
	ctx = beginCall(ctx, l.obs, callWait, KindLimit, key)
	start := waitStart(ctx, l.obs, systemClock{}, KindLimit, key)
	err := l.waitN(ctx, key, n)
	l.waited(ctx, key, n, start, err)
	return err
}

// waitN is WaitN without its events.
func (l *Limiter) waitN(ctx context.Context, key string, n int) error {
	for {
		r, err := l.AllowN(ctx, key, n)
		switch {
		case err != nil:
			return err
		case r.Allowed > 0:
			return nil
		}
		delay := max(r.RetryAfter, time.Millisecond)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
			return &waitDeadlineError{key: key, n: n, wait: delay}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// waitDeadlineError is WaitN's answer when the wait would pass ctx's
// deadline.
type waitDeadlineError struct {
	key  string
	n    int
	wait time.Duration
}

func (e *waitDeadlineError) Error() string {
	return fmt.Sprintf("%v: rate limiter %q: %d requests would be admitted in %v, after the context's deadline", ErrNotAcquired, e.key, e.n, e.wait.Round(time.Millisecond))
}

func (e *waitDeadlineError) Is(target error) bool {
	return target == ErrNotAcquired || target == context.DeadlineExceeded
}
