package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

// The read-write lock: a hash PREFIX{K}:rw (the mode, the last fence, each
// holding's fence, the writer-waiting mark) and a sorted set PREFIX{K}:rw:exp
// of each holding's expiry on the server's clock (see rw.lua). Every script
// prunes the holdings, and the mark, that have expired first, so each
// holding ends at its own expiry whatever the others do. A release records
// its call id at PREFIX{K}:rw:rel:<token> for the retention, so that a
// resent release is recognised, and, if it leaves the key free, publishes
// on PREFIX{K}:rw:released, as a downgrade does. All of them share the {K} hash tag.

var (
	//go:embed rw.lua
	rwLua string
	//go:embed rw_acquire.lua
	rwAcquireLua string
	//go:embed rw_extend.lua
	rwExtendLua string
	//go:embed rw_release.lua
	rwReleaseLua string
	//go:embed rw_inspect.lua
	rwInspectLua string

	rwAcquireScript = redis.NewScript(rwLua + rwAcquireLua)
	rwExtendScript  = redis.NewScript(rwLua + rwExtendLua)
	rwReleaseScript = redis.NewScript(rwLua + rwReleaseLua)
	rwInspectScript = redis.NewScript(rwLua + rwInspectLua)

	hotRWAcquire = newHotScript(rwAcquireScript, rwLua+rwAcquireLua)
	hotRWExtend  = newHotScript(rwExtendScript, rwLua+rwExtendLua)
	hotRWRelease = newHotScript(rwReleaseScript, rwLua+rwReleaseLua)

	// markArg is driver.WriterWaitTTL in ms, boxed once for the hot path.
	markArg any = ms(driver.WriterWaitTTL)
)

var (
	_ driver.RWMutex     = (*Store)(nil)
	_ driver.RWNotifier  = (*Store)(nil)
	_ driver.RWInspector = (*Store)(nil)
)

// RWKeys returns the Redis keys of read-write lock key: the hash and the
// sorted set of expiries (the release records and the channel share their
// prefix). It does no I/O and does not validate key.
func (s *Store) RWKeys(key string) (hash, expiries string) {
	h := s.lock(key) + ":rw"
	return h, h + ":exp"
}

// checkRW validates a read-write lock call before any I/O.
func checkRW(ctx context.Context, key string, ttl time.Duration) error {
	return checkCall(ctx, key, driver.ValidateRW(key, ttl))
}

// AcquireRead implements driver.RWMutex in one script call (sent with the
// other calls in flight when enough are, as Acquire is; so are the other
// calls of the read-write lock but InspectRW): expired
// holdings and mark are pruned, then token gets a read holding unless a
// writer holds key or a writer-waiting mark is live (a
// *driver.RWTakenError, changing nothing). A reader's call is a re-entry,
// the writer's a downgrade (which publishes on the lock's channel). Bad
// arguments match driver.ErrInvalid before any I/O (also a key starting
// with '}'). Errors of the server are classified as for Acquire; any other
// error leaves the outcome unknown.
func (s *Store) AcquireRead(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	return s.acquireRW(ctx, key, token, "r", ttl)
}

// AcquireWrite implements driver.RWMutex in one script call: token gets the
// write holding if nothing holds key; otherwise a *driver.RWTakenError,
// with the writer-waiting mark set to token for driver.WriterWaitTTL on the
// server's clock. A reader's call returns driver.ErrUpgrade, changing
// nothing. Other errors are as for AcquireRead.
func (s *Store) AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	return s.acquireRW(ctx, key, token, "w", ttl)
}

func (s *Store) acquireRW(ctx context.Context, key, token, mode string, ttl time.Duration) (driver.RWGrant, error) {
	if err := checkRW(ctx, key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	h, z := s.RWKeys(key)
	v, err := s.run(ctx, hotRWAcquire, []any{nil, nil, 2, h, z, token, mode, ttlArg(ttl), s.keep, markArg, h + ":released"}).Int64Slice()
	switch {
	case err != nil:
		return driver.RWGrant{}, classify(err, key)
	case len(v) == 4 && v[0] == 1:
		return driver.RWGrant{Mode: driver.RWMode(v[3]), Fence: uint64(v[1]), Readers: int(v[2]), TTL: ttl}, nil
	case len(v) == 5 && v[0] == 0:
		return driver.RWGrant{}, &driver.RWTakenError{Held: driver.RWMode(v[1]), Readers: int(v[2]), WriterWaiting: v[3] == 1, Remaining: pttl(v[4])}
	case len(v) == 1 && v[0] == -1:
		return driver.RWGrant{}, fmt.Errorf("read-write lock %q: %w", key, driver.ErrUpgrade)
	}
	return driver.RWGrant{}, fmt.Errorf("redisstore: unexpected read-write lock acquire reply %v", v)
}

// ExtendRW implements driver.RWMutex in one script call. If token holds
// nothing of key it changes nothing and returns driver.NotHeld
// (ErrExpired). Other errors are as for AcquireRead.
func (s *Store) ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if err := checkRW(ctx, key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	h, z := s.RWKeys(key)
	v, err := s.extendHolding(ctx, hotRWExtend, "read-write lock", key, h, z, token, ttl)
	if err != nil {
		return driver.RWGrant{}, err
	}
	return driver.RWGrant{Mode: driver.RWMode(v[3]), Fence: uint64(v[1]), Readers: int(v[2]), TTL: ttl}, nil
}

// ReleaseRW implements driver.RWMutex in one script call, which publishes
// on the lock's channel if it leaves the key free. If token holds nothing of key it changes nothing
// and returns driver.NotHeld (ErrExpired); a resent release that already
// ran answers nil. Other errors are as for AcquireRead.
func (s *Store) ReleaseRW(ctx context.Context, key, token string) error {
	if err := checkRW(ctx, key, time.Millisecond); err != nil {
		return err
	}
	h, z := s.RWKeys(key)
	return s.releaseHolding(ctx, hotRWRelease, key, h, z, token)
}

// SubscribeRW implements driver.RWNotifier on the lock's channel, through
// the store's one subscription connection, as Subscribe does for locks
// (same errors).
func (s *Store) SubscribeRW(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	h, _ := s.RWKeys(key)
	return s.subscribeReleased(ctx, key, h)
}

// InspectRW implements driver.RWInspector with one read-only script call;
// errors are as for AcquireRead.
func (s *Store) InspectRW(ctx context.Context, key string) (driver.RWInfo, error) {
	if err := checkRW(ctx, key, time.Millisecond); err != nil {
		return driver.RWInfo{}, err
	}
	h, z := s.RWKeys(key)
	v, err := s.inspectHoldings(ctx, rwInspectScript, "read-write lock", key, h, z, 3)
	if err != nil {
		return driver.RWInfo{}, err
	}
	mode, _ := v[0].(int64)
	mark, _ := v[1].(int64)
	info := driver.RWInfo{Mode: driver.RWMode(mode), WriterWaiting: time.Duration(mark) * time.Millisecond}
	for i := 2; i < len(v); i += 3 {
		tok, _ := v[i].(string)
		f, _ := v[i+1].(int64)
		left, _ := v[i+2].(int64)
		info.Holders = append(info.Holders, driver.RWHolder{Token: tok, Mode: info.Mode, Fence: uint64(f), Remaining: time.Duration(left) * time.Millisecond})
	}
	return info, nil
}
