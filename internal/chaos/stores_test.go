package chaos_test

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock"
	"example.com/dlock/driver"
	"example.com/dlock/redisstore"
)

// Deliberately broken stores: the negative controls. Each removes one check
// the real store makes; the same scenario run over them must show the
// violation, or the scenario proves nothing.

// noCheckStore grants every Acquire, even when another owner holds the key
// (the token check removed from acquire). Fences still increase.
type noCheckStore struct {
	*redisstore.Store
	rdb *redis.Client
}

func (s noCheckStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := s.Store.Acquire(ctx, key, token, ttl)
	var ce *driver.ContendedError
	if !errors.As(err, &ce) {
		return g, err
	}
	lock, _ := s.Keys(key)
	info, err := s.Inspect(ctx, key)
	if err != nil {
		return driver.Grant{}, err
	}
	f := info.Fence + 1 // "<holds>:<fence>:<call id>:<owner>": redisstore's layout
	err = s.rdb.Set(ctx, lock, "1:"+strconv.FormatUint(f, 10)+":mutant:"+token, redis.KeepTTL).Err()
	return driver.Grant{Fence: f, Holds: 1, TTL: ttl}, err
}

// releaseAnyStore deletes the key on Release whoever holds it (the token
// check removed from release).
type releaseAnyStore struct {
	*redisstore.Store
	rdb *redis.Client
}

func (s releaseAnyStore) Release(ctx context.Context, key, token string) error {
	lock, _ := s.Keys(key)
	return s.rdb.Del(ctx, lock).Err()
}

// resurrectStore turns an Extend of a lost lock into a fresh acquisition
// (setNX-on-extend): the lock comes back from the dead.
type resurrectStore struct{ *redisstore.Store }

func (s resurrectStore) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := s.Store.Extend(ctx, key, token, ttl)
	if errors.Is(err, dlock.ErrExpired) {
		return s.Store.Acquire(ctx, key, token, ttl)
	}
	return g, err
}

// persistStore leaves the key without an expiry, as a lock with no TTL
// would: a crashed holder keeps it forever.
type persistStore struct {
	*redisstore.Store
	rdb *redis.Client
}

func (s persistStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := s.Store.Acquire(ctx, key, token, ttl)
	if err == nil {
		lock, _ := s.Keys(key)
		err = s.rdb.Persist(ctx, lock).Err()
	}
	return g, err
}
