package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
)

var (
	//go:embed transfer.lua
	transferLua    string
	transferSrc    = lockLua + transferLua
	transferScript = redis.NewScript(transferSrc)
)

var _ dlock.Transferer = (*Store)(nil)

// Transfer implements dlock.Transferer in one round trip. The new holding
// gets a fence as an Acquire would: max(last + 1, the server's TIME in µs).
func (s *Store) Transfer(ctx context.Context, key, from, to string, ttl time.Duration) (dlock.Grant, error) {
	if err := checkKey(key); err != nil {
		return dlock.Grant{}, err
	}
	lock, _, done := s.done(key, from)
	var buf [2]int64
	v, err := ints(s.run(ctx, hotTransfer, []any{nil, nil, 2, lock, done, from, to, ttlArg(ttl), callID(), s.keep}), buf[:0])
	switch {
	case err != nil:
		return dlock.Grant{}, classify(err, key)
	case len(v) == 2 && v[0] == 1:
		return dlock.Grant{Fence: uint64(v[1]), Holds: 1, TTL: ttl}, nil
	case len(v) == 1 && v[0] == -2:
		return dlock.Grant{}, fmt.Errorf("%w: %q is held more than once by its owner: not transferable", dlock.ErrInvalid, key)
	case len(v) == 1:
		return dlock.Grant{}, notHeld(v[0] == 0)
	}
	return dlock.Grant{}, fmt.Errorf("redisstore: unexpected transfer reply %v", v)
}
