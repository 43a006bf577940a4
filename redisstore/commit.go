package redisstore

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock/driver"
)

// Lease.Commit's store side: release.lua and transfer.lua take the caller's
// resource key and value as optional arguments and SET it after their
// ownership check, in the same script and round trip.

// releaseWrite is the Apply step of ReleaseWrite. resource is a Redis key used
// verbatim (no prefix), set with SET (replacing a value of any type). In a
// Cluster it must hash to the lock's slot, as for AcquireRead; otherwise the
// call fails with an error matching driver.ErrInvalid and changes nothing.
func (s *Store) releaseWrite(ctx context.Context, key, token, resource, value string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	lock, channel, done := s.done(key, token)
	n, err := s.run(ctx, hotRelease, []any{nil, nil, 3, lock, done, resource, token, channel, callID(), s.keep, value}).Int64()
	switch {
	case err != nil:
		return readError(err, key, resource)
	case n >= 0:
		return nil
	}
	return notHeld(n == -1)
}

// transferWrite is the Apply step of TransferWrite.; resource and read are as for
// ReleaseWrite and AcquireRead.
func (s *Store) transferWrite(ctx context.Context, key, from, to string, ttl time.Duration, resource, value, read string) (driver.Grant, driver.Value, error) {
	if err := checkKey(key); err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	lock, _, done := s.done(key, from)
	args := make([]any, 0, 13)
	args = append(args, nil, nil, 3, lock, done, resource)
	named := resource
	if read != "" {
		args[2] = 4
		args = append(args, read)
		named += " or " + read
	}
	args = append(args, from, to, ttlArg(ttl), callID(), s.keep, value)
	var buf [2]int64
	v, val, err := intsAndValue(s.run(ctx, hotTransfer, args), buf[:0])
	switch {
	case err != nil:
		return driver.Grant{}, driver.Value{}, readError(err, key, named)
	case len(v) == 2 && v[0] == 1 && (val != nil) == (read != ""):
		g := driver.Grant{Fence: uint64(v[1]), Holds: 1, TTL: ttl}
		if val == nil {
			return g, driver.Value{}, nil
		}
		return g, *val, nil
	case len(v) == 1 && v[0] == -2:
		return driver.Grant{}, driver.Value{}, fmt.Errorf("%w: %q is held more than once by its owner: not transferable", driver.ErrInvalid, key)
	case len(v) == 1 && val == nil:
		return driver.Grant{}, driver.Value{}, notHeld(v[0] == 0)
	}
	return driver.Grant{}, driver.Value{}, fmt.Errorf("redisstore: unexpected transfer reply %v", v)
}
