package redisstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"example.com/dlock/driver"
)

// AcquireCall is Acquire with a call id chosen by the caller instead of a
// fresh one: the lock records it (see the package doc) until the next call
// that changes the lock, so that the caller can later recognise its own
// acquisition there. Redlock uses it to undo a failed acquisition on a node
// only if that acquisition is what the node holds (see package redlock).
// call must be unique to this acquisition across every process that uses
// the token (a random id), non-empty, and must not contain ':'; otherwise
// AcquireCall returns an error matching driver.ErrInvalid and sends
// nothing. Replies and errors are as for Acquire.
func (s *Store) AcquireCall(ctx context.Context, key, token string, ttl time.Duration, call string) (driver.Grant, error) {
	if err := checkKey(key); err != nil {
		return driver.Grant{}, err
	}
	if call == "" || strings.Contains(call, ":") {
		return driver.Grant{}, fmt.Errorf("%w: call id must be non-empty and free of ':'", driver.ErrInvalid)
	}
	cmd := s.run(ctx, hotAcquire, []any{nil, nil, 1, s.lock(key), token, ttlArg(ttl), call})
	if f, ok := cmd.Val().(int64); ok && cmd.Err() == nil && f > 0 {
		return driver.Grant{Fence: uint64(f), Holds: 1, TTL: ttl}, nil
	}
	var buf [3]int64
	v, err := ints(cmd, buf[:0])
	switch {
	case err != nil:
		return driver.Grant{}, classify(err, key)
	case len(v) == 2 && v[0] == 0:
		return driver.Grant{}, &driver.ContendedError{Remaining: pttl(v[1])}
	case len(v) != 3:
		return driver.Grant{}, fmt.Errorf("redisstore: unexpected acquire reply %v", v)
	}
	return driver.Grant{Fence: uint64(v[1]), Holds: int(v[2]), TTL: ttl}, nil
}

// ReleaseFence is Release, except that a final release leaves a tombstone
// whose fence is at least fence (never lower than the lock's own): the next
// holding's fence then exceeds it (see acquire.lua). Redlock ends a holding
// with it, so that every node of the holding's majority keeps the
// holding's fence, the maximum over its nodes (see package redlock), without
// a round trip of its own. Replies, errors and replays are as for Release.
func (s *Store) ReleaseFence(ctx context.Context, key, token string, fence uint64) error {
	return s.release(ctx, key, token, fence)
}
