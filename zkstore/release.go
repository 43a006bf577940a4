package zkstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// Release implements driver.Mutex: one conditional write on our node, by
// its data version: setData of the hold count when re-entered, else delete.
// A node of another session is never touched unless it carries the
// token's digest (a holding of the token through another Store, which it
// releases the same way after reading it). A missing node returns
// driver.NotHeld. If the connection fails the store keeps the holding
// (CURATOR-678: local state is dropped only when the node is known gone)
// and returns an error of unknown outcome; calling Release again retries.
//
// A ctx that has already ended returns an error matching ctx's error at
// once (no other sentinel): nothing is sent and nothing changes. The lock
// node is ephemeral, with no TTL of its own: it stays until a Release with
// a live context deletes it, or the session ends (Close of a store made by
// Dial, or expiry). If ctx ends while the delete is in flight, the error
// matches ctx's and the outcome is unknown, as for a connection failure.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := s.checkKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("zkstore: release %q: nothing sent, the lock is still held: %w", key, err)
	}
	for range maxAttempts {
		h, ok := s.lookup(key, token)
		if !ok {
			var err error
			if h, err = s.foreign(ctx, key, token); err != nil || h == nil {
				if err == nil {
					err = s.notHeld(ctx, key)
				}
				return err
			}
		}
		err := s.releaseOnce(ctx, key, h)
		if !errors.Is(err, errChanged) {
			return err
		}
	}
	return wrapErr("release", key, errors.New("the node kept changing"))
}

// errChanged reports a conditional write that found the node changed.
var errChanged = errors.New("zkstore: node changed")

func (s *Store) releaseOnce(ctx context.Context, key string, h *holding) error {
	var st *zk.Stat
	err := s.write(ctx, func() error {
		if h.holds > 1 {
			var e error
			st, e = s.conn.Set(h.path, h.data(h.holds-1), h.version)
			return e
		}
		return s.conn.Delete(h.path, h.version)
	})
	switch {
	case err == nil && h.holds > 1:
		h.holds, h.version = h.holds-1, st.Version
		s.rememberIfOurs(key, h)
		return nil
	case err == nil:
		s.forget(key, h.path)
		return nil
	case errors.Is(err, zk.ErrNoNode):
		s.forget(key, h.path)
		return s.notHeld(ctx, key)
	case errors.Is(err, zk.ErrBadVersion):
		s.forget(key, h.path)
		return errChanged
	default:
		return wrapErr("release", key, err) // the holding stays: retry
	}
}

// rememberIfOurs records h if it is in the store's own session.
func (s *Store) rememberIfOurs(key string, h *holding) {
	if h.sid == s.conn.SessionID() {
		s.remember(key, h)
	}
}

// foreign finds the token's holding of key that this store does not know:
// the first lock node, if its data carries the token's digest (nil if
// not). One in this store's session is remembered again.
func (s *Store) foreign(ctx context.Context, key, token string) (*holding, error) {
	lp := s.lockPath(key)
	name, data, st, err := s.firstNode(ctx, key, lp)
	if err != nil || st == nil {
		return nil, err
	}
	d, ok := parseData(data)
	if !ok || d.dig != digest(token) {
		return nil, nil
	}
	h := &holding{path: lp + "/" + name, sid: st.EphemeralOwner, czxid: st.Czxid, fence: fenceOf(d, st.Czxid, st.Mzxid),
		version: st.Version, holds: d.holds, token: token, meta: d.meta}
	s.rememberIfOurs(key, h)
	return h, nil
}

// Extend implements driver.Mutex: a sync, whose reply confirms the session
// (it goes through the leader: a follower cut off from the leader cannot
// answer it, although it still answers reads), then an exists on our node,
// which sees the state after the sync: 2 round trips, no write. Concurrent
// Extends of one node share the requests. ttl is ignored;
// Grant.TTL is how long the session is certain to last. A token holding
// key through another session gets an error matching driver.ErrInvalid
// (this store cannot renew that session).
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := s.checkKey(key); err != nil {
		return driver.Grant{}, err
	}
	start := time.Now()
	h, ok := s.lookup(key, token)
	if !ok {
		var err error
		if h, err = s.foreign(ctx, key, token); err != nil {
			return driver.Grant{}, err
		}
		if h == nil {
			return driver.Grant{}, s.notHeld(ctx, key)
		}
		if h.sid != s.conn.SessionID() {
			return driver.Grant{}, errOtherSession(key)
		}
		return driver.Grant{Fence: uint64(h.fence), Holds: h.holds, TTL: s.certainTTL(h.sid, start)}, nil
	}
	st, err := s.exists(ctx, h.path)
	switch {
	case err != nil:
		return driver.Grant{}, wrapErr("extend", key, err)
	case st == nil || (h.czxid != 0 && st.Czxid != h.czxid) || st.EphemeralOwner != h.sid:
		s.forget(key, h.path)
		return driver.Grant{}, s.notHeld(ctx, key)
	case st.Version != h.version:
		if err := s.reload(ctx, key, h); err != nil {
			return driver.Grant{}, err
		}
		if h, ok = s.lookup(key, token); !ok {
			return driver.Grant{}, s.notHeld(ctx, key)
		}
	}
	return driver.Grant{Fence: uint64(h.fence), Holds: h.holds, TTL: s.certainTTL(h.sid, start)}, nil
}

// ExtendBatch implements driver.BatchExtender: the Extends run at once, so
// that their requests are in flight together (two round trips for the
// batch, as ZooKeeper pipelines a session's requests). Each result is
// what Extend would return for its request.
func (s *Store) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	out := make([]driver.ExtendResult, len(reqs))
	done := make(chan struct{}, len(reqs))
	for i, r := range reqs {
		go func() {
			out[i].Grant, out[i].Err = s.Extend(ctx, r.Key, r.Token, r.TTL)
			done <- struct{}{}
		}()
	}
	for range reqs {
		<-done
	}
	return out
}

// flight is one sync + exists under way, shared by concurrent Extends of a
// node.
type flight struct {
	done chan struct{}
	st   *zk.Stat
	err  error
}

// exists syncs and reads path's stat (nil if it does not exist), sharing
// the requests with concurrent callers for the same path.
func (s *Store) exists(ctx context.Context, path string) (*zk.Stat, error) {
	s.mu.Lock()
	f, ok := s.ext[path]
	if !ok {
		f = &flight{done: make(chan struct{})}
		s.ext[path] = f
		go s.fly(ctx, path, f)
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.st, f.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func (s *Store) fly(ctx context.Context, path string, f *flight) {
	ctx = context.WithoutCancel(ctx)
	err := s.sync(ctx, path)
	if err == nil {
		var ok bool
		var st *zk.Stat
		err = s.read(ctx, func() error {
			var e error
			ok, st, e = s.conn.Exists(path)
			return e
		})
		if err == nil && ok {
			f.st = st
		}
	}
	f.err = err
	s.mu.Lock()
	delete(s.ext, path)
	s.mu.Unlock()
	close(f.done)
}

// sync makes the server the conn is on catch up with the leader (its reply
// confirms the session: see write); the reads after it see at least the
// leader's state at that point.
func (s *Store) sync(ctx context.Context, path string) error {
	s.syncs.Add(1)
	return s.write(ctx, func() error {
		_, e := s.conn.Sync(path)
		return e
	})
}
