package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

// The semaphore and the read-write lock keep their holdings alike: a hash
// (hash) and a sorted set of expiries (exp) of one key, scripts that prune
// the expired holdings first, a release record at hash:rel:<token> and a
// channel hash:released. The Go side of their calls that does not depend on
// what a holding is lives here; the scripts are each their own.

// checkCall is the check of a semaphore or read-write lock call before
// any I/O: the arguments' error (invalid), a key that starts with '}'
// (checkKey), then ctx's.
func checkCall(ctx context.Context, key string, invalid error) error {
	if invalid != nil {
		return invalid
	}
	if err := checkKey(key); err != nil {
		return err
	}
	return ctx.Err()
}

// extendHolding runs an extend script (ARGV: token, ttl, keep) on hash and
// exp, on the hot path (one round trip, shared with other calls in
// flight), and returns its grant reply (four values, the first 1);
// driver.NotHeld if token holds nothing of key; the server's error
// classified. what names the primitive in an unexpected reply's error.
func (s *Store) extendHolding(ctx context.Context, h hotScript, what, key, hash, exp, token string, ttl time.Duration) ([]int64, error) {
	v, err := s.run(ctx, h, []any{nil, nil, 2, hash, exp, token, ttlArg(ttl), s.keep}).Int64Slice()
	return extendReply(v, err, what, key)
}

// extendReply reads an extend script's reply v (err its error) for key.
func extendReply(v []int64, err error, what, key string) ([]int64, error) {
	switch {
	case err != nil:
		return nil, classify(err, key)
	case len(v) == 4 && v[0] == 1:
		return v, nil
	case len(v) == 1 && v[0] == 0:
		return nil, driver.NotHeld(false)
	}
	return nil, fmt.Errorf("redisstore: unexpected %s extend reply %v", what, v)
}

// releaseHolding runs a release script (KEYS: hash, exp, the release
// record; ARGV: token, call id, keep, channel) for token's holding of key,
// on the hot path (one round trip, shared with other calls in flight):
// nil once released (or a resent release that already ran), driver.NotHeld
// if token holds nothing, the server's error classified.
func (s *Store) releaseHolding(ctx context.Context, h hotScript, key, hash, exp, token string) error {
	args := []any{nil, nil, 3, hash, exp, hash + ":rel:" + token, token, callID(), s.keep, hash + ":released"}
	n, err := s.run(ctx, h, args).Int64()
	switch {
	case err != nil:
		return classify(err, key)
	case n >= 0:
		return nil
	}
	return driver.NotHeld(false)
}

// subscribeReleased subscribes to the release channel of key's hash,
// through the store's one subscription connection, as Subscribe does for
// locks (same errors).
func (s *Store) subscribeReleased(ctx context.Context, key, hash string) (<-chan struct{}, func(), error) {
	if err := checkKey(key); err != nil {
		return nil, nil, err
	}
	return s.subs.subscribe(ctx, hash+":released")
}

// inspectHoldings runs a read-only inspect script on hash and exp and
// returns its reply: two header values, then stride values per holding.
// what names the primitive in an unexpected reply's error.
func (s *Store) inspectHoldings(ctx context.Context, script *redis.Script, what, key, hash, exp string, stride int) ([]any, error) {
	v, err := script.Run(ctx, s.client, []string{hash, exp}).Slice()
	if err != nil {
		return nil, classify(err, key)
	}
	if len(v) < 2 || len(v)%stride != 2 {
		return nil, fmt.Errorf("redisstore: unexpected %s inspect reply %v", what, v)
	}
	return v, nil
}
