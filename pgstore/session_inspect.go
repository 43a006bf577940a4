package pgstore

import (
	"context"

	"example.com/dlock/driver"
)

var _ driver.Inspector = (*SessionStore)(nil)

// Inspect implements driver.Inspector. Whether the key is held is read
// from pg_locks (any backend holding its advisory lock, dlock or not). For
// a holding of a SessionStore of this process (this one, or another on the
// same database and prefix) Holds and Fence are that holding's; for a
// holder elsewhere Holds is 1 (the server's own count: the store takes one
// advisory lock per holding and counts re-entries itself) and Fence is 0
// (unknown). Token is always empty (the store keeps digests only) and
// Remaining is -1: advisory locks have no TTL. A free key reports Fence 0.
// Errors are as for Waiters.
func (s *SessionStore) Inspect(ctx context.Context, key string) (driver.Info, error) {
	info := driver.Info{Remaining: -1}
	held, err := s.taken(ctx, key)
	if err != nil || !held {
		return info, err
	}
	info.Held, info.Holds = true, 1
	o := s
	if v, ok := registry.Load(s.regKey(key)); ok {
		o = v.(*SessionStore)
	}
	if h := o.eng.Peek(key); h != nil {
		g := o.eng.Grant(h)
		info.Holds, info.Fence = g.Holds, g.Fence
	}
	return info, nil
}
