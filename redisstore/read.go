package redisstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

// The WithRead fast path: acquire.lua and transfer.lua take the caller's
// resource key as an optional KEYS[3] and append GET KEYS[3] to a granted
// reply. It is the same script and the same single EVALSHA as without the
// read, so a read-modify-write critical section costs the grant plus one
// write. Calls without a resource key never reach this file.

// acquireRead is the Apply step of AcquireRead. resource is a Redis key used
// verbatim (no prefix). In a Cluster it must hash to the lock's slot: give it
// the lock key as hash tag ("stock:{KEY}" for lock KEY); otherwise the call
// fails with an error matching driver.ErrInvalid and changes nothing. A
// resource that is not a string fails the same way (WRONGTYPE; since the
// server does not say which key was not a string, the error also matches
// driver.ErrRefused).
func (s *Store) acquireRead(ctx context.Context, key, token string, ttl time.Duration, resource string) (driver.Grant, driver.Value, error) {
	if err := checkKey(key); err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	lock := s.lock(key)
	var cmd *redis.Cmd
	if meta := driver.MetaFrom(ctx); meta != "" {
		cmd = s.run(ctx, hotAcquire, []any{nil, nil, 3, lock, resource, metaKey(lock), token, ttlArg(ttl), callID(), meta})
	} else {
		cmd = s.run(ctx, hotAcquire, []any{nil, nil, 2, lock, resource, token, ttlArg(ttl), callID()})
	}
	var buf [3]int64
	v, val, err := intsAndValue(cmd, buf[:0])
	switch {
	case err != nil:
		return driver.Grant{}, driver.Value{}, readError(err, key, resource)
	case len(v) == 2 && v[0] == 0:
		return driver.Grant{}, driver.Value{}, &driver.ContendedError{Remaining: pttl(v[1])}
	case len(v) == 3 && v[0] == 1 && val != nil:
		return driver.Grant{Fence: uint64(v[1]), Holds: int(v[2]), TTL: ttl}, *val, nil
	}
	return driver.Grant{}, driver.Value{}, fmt.Errorf("redisstore: unexpected acquire reply %v", cmd.Val())
}

// transferRead is the Apply step of TransferRead.; resource is as for AcquireRead.
func (s *Store) transferRead(ctx context.Context, key, from, to string, ttl time.Duration, resource string) (driver.Grant, driver.Value, error) {
	if err := checkKey(key); err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	lock, _, done := s.done(key, from)
	cmd := s.run(ctx, hotTransfer, []any{nil, nil, 3, lock, done, resource, from, to, ttlArg(ttl), callID(), s.keep})
	var buf [2]int64
	v, val, err := intsAndValue(cmd, buf[:0])
	switch {
	case err != nil:
		return driver.Grant{}, driver.Value{}, readError(err, key, resource)
	case len(v) == 2 && v[0] == 1 && val != nil:
		return driver.Grant{Fence: uint64(v[1]), Holds: 1, TTL: ttl}, *val, nil
	case len(v) == 1 && v[0] == -2:
		return driver.Grant{}, driver.Value{}, fmt.Errorf("%w: %q is held more than once by its owner: not transferable", driver.ErrInvalid, key)
	case len(v) == 1 && val == nil:
		return driver.Grant{}, driver.Value{}, notHeld(v[0] == 0)
	}
	return driver.Grant{}, driver.Value{}, fmt.Errorf("redisstore: unexpected transfer reply %v", cmd.Val())
}

// intsAndValue reads a script reply of integers, optionally followed by one
// bulk string or nil (the resource's value): val is nil when the reply had
// only integers.
func intsAndValue(cmd *redis.Cmd, dst []int64) (ints []int64, val *driver.Value, err error) {
	reply, err := cmd.Result()
	if err != nil {
		return nil, nil, err
	}
	arr, ok := reply.([]any)
	if !ok {
		return nil, nil, fmt.Errorf("redisstore: unexpected reply %v", reply)
	}
	for i, x := range arr {
		switch x := x.(type) {
		case int64:
			dst = append(dst, x)
			continue
		case string:
			val = &driver.Value{Data: x, Found: true}
		case nil:
			val = &driver.Value{}
		}
		if val == nil || i != len(arr)-1 {
			return nil, nil, fmt.Errorf("redisstore: unexpected reply %v", reply)
		}
	}
	return dst, val, nil
}

// readError types the server's refusals of a resource key: a Cluster key in
// another slot (CROSSSLOT), or a key that is not a string (WRONGTYPE: the
// resource's or the lock's, the server does not say which, so it matches
// both driver.ErrInvalid and driver.ErrRefused). Other errors are classified
// as for calls without a resource.
func readError(err error, key, resource string) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "CROSSSLOT"):
		return fmt.Errorf("%w: resource %q is not in the slot of lock %q: use the hash tag {%s} in it: %w", driver.ErrInvalid, resource, key, key, err)
	case strings.Contains(msg, "WRONGTYPE"):
		return fmt.Errorf("%w: %w: resource %q or lock %q is not a string: %w", driver.ErrInvalid, driver.ErrRefused, resource, key, err)
	}
	return classify(err, key)
}
