package zkstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"github.com/go-zookeeper/zk"
)

var _ driver.Transferer = (*Store)(nil)

// Transfer implements driver.Transferer (a dlock Client's hand-off to a
// local waiter): one conditional setData of our node that replaces from's
// digest by to's, with one hold. The node keeps its place, first in the
// queue, so no waiter (dlock's or Curator's) can slip in between, and the
// hand-off is one write instead of a delete and a create. The new holding's
// fence is the zxid of that write (the node's mzxid, marked in its data),
// greater than every earlier fence. from must hold key through this store's
// session with one hold: a re-entered holding returns an error matching
// driver.ErrInvalid, as does one through another session; a token that does
// not hold key gets driver.NotHeld.
func (s *Store) Transfer(ctx context.Context, key, from, to string, ttl time.Duration) (driver.Grant, error) {
	if err := s.checkKey(key); err != nil {
		return driver.Grant{}, err
	}
	start := time.Now()
	for range maxAttempts {
		h, err := s.holdingOf(ctx, key, from)
		if err != nil {
			return driver.Grant{}, err
		}
		if h.holds != 1 {
			return driver.Grant{}, fmt.Errorf("%w: zkstore: transfer of %q, held %d times by the token", driver.ErrInvalid, key, h.holds)
		}
		var st *zk.Stat
		err = s.write(ctx, func() error {
			var e error
			st, e = s.conn.Set(h.path, nodeData(1, digest(to), transferMark, h.meta), h.version)
			return e
		})
		switch {
		case err == nil:
			n := &holding{path: h.path, sid: h.sid, czxid: h.czxid, fence: st.Mzxid, version: st.Version, holds: 1, token: to, meta: h.meta}
			s.remember(key, n)
			return driver.Grant{Fence: uint64(n.fence), Holds: 1, TTL: s.certainTTL(n.sid, start)}, nil
		case errors.Is(err, zk.ErrNoNode):
			s.forget(key, h.path)
			return driver.Grant{}, s.notHeld(ctx, key)
		case errors.Is(err, zk.ErrBadVersion):
			if err := s.reload(ctx, key, h); err != nil {
				return driver.Grant{}, err
			}
		default:
			return driver.Grant{}, wrapErr("transfer", key, err)
		}
	}
	return driver.Grant{}, wrapErr("transfer", key, errors.New("the node kept changing"))
}

// holdingOf returns token's holding of key in this store's session: the
// remembered one, or the lock path's first node if it carries the token's
// digest. NotHeld if the token holds nothing; ErrInvalid if it holds key
// through another session.
func (s *Store) holdingOf(ctx context.Context, key, token string) (*holding, error) {
	if h, ok := s.lookup(key, token); ok {
		return h, nil
	}
	h, err := s.foreign(ctx, key, token)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, s.notHeld(ctx, key)
	}
	if h.sid != s.conn.SessionID() {
		return nil, errOtherSession(key)
	}
	return h, nil
}
