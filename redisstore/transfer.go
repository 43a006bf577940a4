package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed transfer.lua
	transferLua    string
	transferSrc    = lockLua + transferLua
	transferScript = redis.NewScript(transferSrc)
)

var _ driver.Transferer = (*Store)(nil)

// Transfer implements driver.Transferer in one round trip. The new holding
// gets a fence as an Acquire would: max(last + 1, the server's TIME in µs).
// If from does not hold key it changes nothing and returns driver.NotHeld,
// as Extend; if from holds it more than once, an error matching
// driver.ErrInvalid. Other errors are as for Acquire.
func (s *Store) Transfer(ctx context.Context, key, from, to string, ttl time.Duration) (driver.Grant, error) {
	if err := checkKey(key); err != nil {
		return driver.Grant{}, err
	}
	lock, _, done := s.done(key, from)
	var buf [2]int64
	v, err := ints(s.run(ctx, hotTransfer, []any{nil, nil, 2, lock, done, from, to, ttlArg(ttl), callID(), s.keep}), buf[:0])
	switch {
	case err != nil:
		return driver.Grant{}, classify(err, key)
	case len(v) == 2 && v[0] == 1:
		return driver.Grant{Fence: uint64(v[1]), Holds: 1, TTL: ttl}, nil
	case len(v) == 1 && v[0] == -2:
		return driver.Grant{}, fmt.Errorf("%w: %q is held more than once by its owner: not transferable", driver.ErrInvalid, key)
	case len(v) == 1:
		return driver.Grant{}, notHeld(v[0] == 0)
	}
	return driver.Grant{}, fmt.Errorf("redisstore: unexpected transfer reply %v", v)
}
