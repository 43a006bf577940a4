package redisstore

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock/driver"
)

var _ driver.Atomic = (*Store)(nil)

// Apply implements driver.Atomic with the same scripts as the plain calls:
// acquire.lua and transfer.lua read the resource key, release.lua and
// transfer.lua write it after their ownership check, in one EVALSHA.
//
// A resource is a Redis key used verbatim (no prefix), set with SET
// (replacing a value of any type). In a Cluster it must hash to the lock's
// slot: give it the lock key as hash tag ("stock:{KEY}" for lock KEY);
// otherwise the call fails with an error matching driver.ErrInvalid and
// changes nothing. A resource read that is not a string fails the same way
// (WRONGTYPE; since the server does not say which key was not a string, the
// error also matches driver.ErrRefused). A release cannot read and an
// acquire cannot write: such steps match driver.ErrInvalid.
func (s *Store) Apply(ctx context.Context, st driver.Step) (driver.Grant, driver.Value, error) {
	switch {
	case st.Action == driver.Acquire && st.Write == nil && st.Read != "":
		return s.acquireRead(ctx, st.Key, st.Token, st.TTL, st.Read)
	case st.Action == driver.Acquire && st.Write == nil:
		g, err := s.Acquire(ctx, st.Key, st.Token, st.TTL)
		return g, driver.Value{}, err
	case st.Action == driver.Transfer && st.Write != nil:
		return s.transferWrite(ctx, st.Key, st.Token, st.To, st.TTL, st.Write.Resource, st.Write.Value, st.Read)
	case st.Action == driver.Transfer && st.Read != "":
		return s.transferRead(ctx, st.Key, st.Token, st.To, st.TTL, st.Read)
	case st.Action == driver.Transfer:
		g, err := s.Transfer(ctx, st.Key, st.Token, st.To, st.TTL)
		return g, driver.Value{}, err
	case st.Action == driver.Release && st.Read == "" && st.Write != nil:
		return driver.Grant{}, driver.Value{}, s.releaseWrite(ctx, st.Key, st.Token, st.Write.Resource, st.Write.Value)
	case st.Action == driver.Release && st.Read == "":
		return driver.Grant{}, driver.Value{}, s.Release(ctx, st.Key, st.Token)
	}
	return driver.Grant{}, driver.Value{}, fmt.Errorf("%w: redisstore: unsupported step (action %d, write %t, read %q)", driver.ErrInvalid, st.Action, st.Write != nil, st.Read)
}

// Model implements driver.Mutex: per-key TTLs in milliseconds (PX), at least
// 10 ms, kept on the server's clock (Redis expires keys by its own time).
func (s *Store) Model() driver.Model {
	return driver.Model{MinTTL: 10 * time.Millisecond, Granularity: time.Millisecond, ServerClock: true}
}
