package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

// The semaphore: a hash PREFIX{K}:sem (the limit, the permits out, the last
// fence, each holding's permits and fence) and a sorted set
// PREFIX{K}:sem:exp of each holding's expiry on the server's clock (see
// sem.lua). Every script prunes the holdings that have expired first, so
// each holding ends at its own expiry whatever the others do. A final
// release records its call id at PREFIX{K}:sem:rel:<token> for the
// retention, so that a resent release is recognised, and publishes on
// PREFIX{K}:sem:released. All of them share the {K} hash tag.

var (
	//go:embed sem.lua
	semLua string
	//go:embed sem_acquire.lua
	semAcquireLua string
	//go:embed sem_extend.lua
	semExtendLua string
	//go:embed sem_release.lua
	semReleaseLua string
	//go:embed sem_inspect.lua
	semInspectLua string

	semAcquireScript = redis.NewScript(semLua + semAcquireLua)
	semExtendScript  = redis.NewScript(semLua + semExtendLua)
	semReleaseScript = redis.NewScript(semLua + semReleaseLua)
	semInspectScript = redis.NewScript(semLua + semInspectLua)

	hotSemAcquire = newHotScript(semAcquireScript, semLua+semAcquireLua)
	hotSemRelease = newHotScript(semReleaseScript, semLua+semReleaseLua)
	hotSemExtend  = newHotScript(semExtendScript, semLua+semExtendLua)
)

var (
	_ driver.Semaphore       = (*Store)(nil)
	_ driver.PermitNotifier  = (*Store)(nil)
	_ driver.PermitInspector = (*Store)(nil)
)

// SemaphoreKeys returns the Redis keys of semaphore key: the hash and the
// sorted set of expiries (the release records and the channel share their
// prefix). It does no I/O and does not validate key.
func (s *Store) SemaphoreKeys(key string) (hash, expiries string) {
	h := s.lock(key) + ":sem"
	return h, h + ":exp"
}

// checkSem validates a semaphore call before any I/O.
func checkSem(ctx context.Context, key string, n, k int, ttl time.Duration) error {
	return checkCall(ctx, key, driver.ValidatePermits(key, n, k, ttl))
}

// AcquirePermits implements driver.Semaphore in one script call (sent with
// the other calls in flight when enough are, as Acquire is): expired
// holdings are pruned, then token gets k permits if k are free (n becomes
// the limit if none was out). Refusals change nothing: a
// *driver.PermitsTakenError (Remaining: the earliest holding's time left),
// a *driver.LimitMismatchError, or an error matching driver.ErrInvalid for
// bad arguments (before any I/O, also for a key starting with '}') or a
// token that holds the key with another k. Errors of the server are
// classified as for Acquire; any other error leaves the outcome unknown.
func (s *Store) AcquirePermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) (driver.PermitGrant, error) {
	if err := checkSem(ctx, key, n, k, ttl); err != nil {
		return driver.PermitGrant{}, err
	}
	h, z := s.SemaphoreKeys(key)
	v, err := s.run(ctx, hotSemAcquire, []any{nil, nil, 2, h, z, token, n, k, ttlArg(ttl), s.keep}).Int64Slice()
	switch {
	case err != nil:
		return driver.PermitGrant{}, classify(err, key)
	case len(v) == 3 && v[0] == 1:
		return driver.PermitGrant{Fence: uint64(v[1]), Permits: k, Used: int(v[2]), TTL: ttl}, nil
	case len(v) == 4 && v[0] == 0:
		return driver.PermitGrant{}, &driver.PermitsTakenError{Used: int(v[1]), Limit: int(v[2]), Remaining: pttl(v[3])}
	case len(v) == 2 && v[0] == -1:
		return driver.PermitGrant{}, &driver.LimitMismatchError{Stored: int(v[1]), Asked: n}
	case len(v) == 2 && v[0] == -2:
		return driver.PermitGrant{}, fmt.Errorf("%w: the token holds %d permits of semaphore %q, asked for %d", driver.ErrInvalid, v[1], key, k)
	}
	return driver.PermitGrant{}, fmt.Errorf("redisstore: unexpected semaphore acquire reply %v", v)
}

// ExtendPermits implements driver.Semaphore in one script call. If token
// holds no permit of key it changes nothing and returns driver.NotHeld
// (ErrExpired). Other errors are as for AcquirePermits.
func (s *Store) ExtendPermits(ctx context.Context, key, token string, ttl time.Duration) (driver.PermitGrant, error) {
	if err := checkSem(ctx, key, 1, 1, ttl); err != nil {
		return driver.PermitGrant{}, err
	}
	h, z := s.SemaphoreKeys(key)
	v, err := s.extendHolding(ctx, hotSemExtend, "semaphore", key, h, z, token, ttl)
	if err != nil {
		return driver.PermitGrant{}, err
	}
	return driver.PermitGrant{Fence: uint64(v[1]), Permits: int(v[2]), Used: int(v[3]), TTL: ttl}, nil
}

// ReleasePermits implements driver.Semaphore in one script call (batched
// as AcquirePermits), which publishes on the semaphore's channel. If token holds no permit of key it
// changes nothing and returns driver.NotHeld (ErrExpired); a resent release
// that already ran answers nil. Other errors are as for AcquirePermits.
func (s *Store) ReleasePermits(ctx context.Context, key, token string) error {
	if err := checkSem(ctx, key, 1, 1, time.Millisecond); err != nil {
		return err
	}
	h, z := s.SemaphoreKeys(key)
	return s.releaseHolding(ctx, hotSemRelease, key, h, z, token)
}

// SubscribePermits implements driver.PermitNotifier on the semaphore's
// channel, through the store's one subscription connection, as Subscribe
// does for locks (same errors).
func (s *Store) SubscribePermits(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	h, _ := s.SemaphoreKeys(key)
	return s.subscribeReleased(ctx, key, h)
}

// InspectPermits implements driver.PermitInspector with one read-only
// script call; errors are as for AcquirePermits.
func (s *Store) InspectPermits(ctx context.Context, key string) (driver.PermitInfo, error) {
	if err := checkSem(ctx, key, 1, 1, time.Millisecond); err != nil {
		return driver.PermitInfo{}, err
	}
	h, z := s.SemaphoreKeys(key)
	v, err := s.inspectHoldings(ctx, semInspectScript, "semaphore", key, h, z, 4)
	if err != nil {
		return driver.PermitInfo{}, err
	}
	limit, _ := v[0].(int64)
	used, _ := v[1].(int64)
	info := driver.PermitInfo{Limit: int(limit), Used: int(used)}
	for i := 2; i < len(v); i += 4 {
		tok, _ := v[i].(string)
		k, _ := v[i+1].(int64)
		f, _ := v[i+2].(int64)
		left, _ := v[i+3].(int64)
		info.Holders = append(info.Holders, driver.PermitHolder{Token: tok, Permits: int(k), Fence: uint64(f), Remaining: time.Duration(left) * time.Millisecond})
	}
	return info, nil
}
