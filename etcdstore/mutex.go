package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"example.com/dlock/driver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// valuePrefix starts the value of every key the store writes; the hold
// count follows.
const valuePrefix = "dlock/1 "

func value(holds int) string { return valuePrefix + strconv.Itoa(holds) }

// parseHolds reads the hold count of a key's value: 1 for an empty value
// (etcdctl lock's keys), an error for a value that is not a lock's.
func parseHolds(v []byte) (int, error) {
	if len(v) == 0 {
		return 1, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(v), valuePrefix))
	if err != nil || !strings.HasPrefix(string(v), valuePrefix) || n < 1 {
		return 0, fmt.Errorf("%w: etcdstore: key holds %q, not a lock's value", driver.ErrRefused, v)
	}
	return n, nil
}

// maxAttempts bounds the compare-and-set retries of one call when the key
// changes under it (only this store writes its keys, so one retry is the
// usual most).
const maxAttempts = 4

// readOps reads our key and the first-created key under its lock's prefix.
func readOps(k, pfx string) []clientv3.Op {
	return []clientv3.Op{clientv3.OpGet(k), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)}
}

// state is what readOps found: our key (nil if absent) and the holder.
type state struct{ own, first *mvccpb.KeyValue }

func readState(rs []*pb.ResponseOp) state {
	var st state
	if kvs := rs[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		st.own = kvs[0]
	}
	if kvs := rs[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
		st.first = kvs[0]
	}
	return st
}

// ours reports whether our key k exists and holds the lock.
func (st state) ours(k string) bool {
	return st.own != nil && st.first != nil && string(st.first.Key) == k
}

// taken reports whether another key than k holds the lock.
func (st state) taken(k string) bool { return st.first != nil && string(st.first.Key) != k }

// Acquire implements driver.Mutex. The first acquisition is one transaction
// that puts our key only if no key exists under the lock's prefix; a
// re-entry is a compare-and-set of the hold count. ttl is ignored: the
// holding lasts as long as the session. A contended key returns a
// *driver.ContendedError with Remaining -1.
func (s *Store) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	start := time.Now()
	sess, err := s.session(ctx)
	if err != nil {
		return driver.Grant{}, err
	}
	k, pfx := s.ownKey(sess, key, token), s.pfx(key)
	for range maxAttempts {
		h, cached := s.lookup(k)
		var txn clientv3.Txn
		if cached {
			txn = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", h.mod)).
				Then(clientv3.OpPut(k, value(h.holds+1), clientv3.WithLease(sess.id)))
		} else {
			h = holding{lease: sess.id, token: token}
			txn = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix()).
				Then(clientv3.OpPut(k, value(1), clientv3.WithLease(sess.id)))
		}
		resp, err := txn.Else(readOps(k, pfx)...).Commit()
		if err != nil {
			return driver.Grant{}, fmt.Errorf("etcdstore: acquire %q: %w", key, err)
		}
		if resp.Succeeded {
			rev := resp.Header.Revision
			if !cached {
				h.create = rev
			}
			h.mod, h.holds = rev, h.holds+1
			s.remember(k, h)
			return driver.Grant{Fence: uint64(h.create), Holds: h.holds, TTL: s.certainTTL(sess, start)}, nil
		}
		st := readState(resp.Responses)
		if st.ours(k) {
			if _, err := s.learn(k, sess, token, st.own); err != nil {
				return driver.Grant{}, err
			}
			continue // re-enter with what we read
		}
		s.forget(k)
		if st.first != nil {
			return driver.Grant{}, &driver.ContendedError{Remaining: -1}
		}
	}
	return driver.Grant{}, fmt.Errorf("etcdstore: acquire %q: the key kept changing", key)
}

// learn records our key's state as read.
func (s *Store) learn(k string, sess *session, token string, kv *mvccpb.KeyValue) (int, error) {
	holds, err := parseHolds(kv.Value)
	if err != nil {
		return 0, err
	}
	s.remember(k, holding{lease: sess.id, create: kv.CreateRevision, mod: kv.ModRevision, holds: holds, token: token})
	return holds, nil
}

// live returns the store's session unless the server said it is gone (it
// may be alive although no longer certain: Release and Extend still try).
func (s *Store) live() *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil || s.sess.dead {
		return nil
	}
	return s.sess
}

// Release implements driver.Mutex: one compare-and-set on our key's
// ModRevision that lowers the hold count or deletes the key, so that a
// retried or stale release cannot delete a newer holding.
func (s *Store) Release(ctx context.Context, key, token string) error {
	sess := s.live()
	if sess == nil {
		return driver.NotHeld(false)
	}
	k, pfx := s.ownKey(sess, key, token), s.pfx(key)
	for range maxAttempts {
		h, cached := s.lookup(k)
		if !cached {
			st, err := s.read(ctx, k, pfx)
			if err != nil {
				return fmt.Errorf("etcdstore: release %q: %w", key, err)
			}
			if !st.ours(k) {
				return driver.NotHeld(st.taken(k))
			}
			if _, err := s.learn(k, sess, token, st.own); err != nil {
				return err
			}
			continue
		}
		op := clientv3.OpDelete(k)
		if h.holds > 1 {
			op = clientv3.OpPut(k, value(h.holds-1), clientv3.WithLease(sess.id))
		}
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", h.mod)).
			Then(op).Else(readOps(k, pfx)...).Commit()
		if err != nil {
			return fmt.Errorf("etcdstore: release %q: %w", key, err)
		}
		if resp.Succeeded {
			if h.holds > 1 {
				h.mod, h.holds = resp.Header.Revision, h.holds-1
				s.remember(k, h)
			} else {
				s.forget(k)
			}
			return nil
		}
		st := readState(resp.Responses)
		if !st.ours(k) {
			s.forget(k)
			return driver.NotHeld(st.taken(k))
		}
		if _, err := s.learn(k, sess, token, st.own); err != nil {
			return err
		}
	}
	return fmt.Errorf("etcdstore: release %q: the key kept changing", key)
}

// read reads our key and the lock's holder in one transaction.
func (s *Store) read(ctx context.Context, k, pfx string) (state, error) {
	resp, err := s.cli.Txn(ctx).Then(readOps(k, pfx)...).Commit()
	if err != nil {
		return state{}, err
	}
	return readState(resp.Responses), nil
}

// Extend implements driver.Mutex: one keepalive of the session (shared with
// concurrent Extends) and one read confirming that token still holds key.
// ttl is ignored; Grant.TTL is how long the session is certain to last.
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	rs := s.ExtendBatch(ctx, []driver.ExtendRequest{{Key: key, Token: token, TTL: ttl}})
	return rs[0].Grant, rs[0].Err
}

// batchSize bounds the requests per read transaction (two operations each,
// under etcd's default limit of 128 operations per transaction).
const batchSize = 60

// ExtendBatch implements driver.BatchExtender: one keepalive for the
// session, then one read transaction per batchSize keys.
func (s *Store) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	start := time.Now()
	out := make([]driver.ExtendResult, len(reqs))
	fail := func(from int, err error) []driver.ExtendResult {
		for i := from; i < len(out); i++ {
			out[i].Err = err
		}
		return out
	}
	sess := s.live()
	if sess == nil {
		return fail(0, driver.NotHeld(false))
	}
	if err := s.keepAlive(ctx, sess); errors.Is(err, errSessionGone) {
		return fail(0, driver.NotHeld(false))
	} else if err != nil {
		return fail(0, err)
	}
	for lo := 0; lo < len(reqs); lo += batchSize {
		hi := min(lo+batchSize, len(reqs))
		var ops []clientv3.Op
		keys := make([]string, hi-lo)
		for i, r := range reqs[lo:hi] {
			keys[i] = s.ownKey(sess, r.Key, r.Token)
			ops = append(ops, readOps(keys[i], s.pfx(r.Key))...)
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fail(lo, fmt.Errorf("etcdstore: extend: %w", err))
		}
		rs := resp.Responses
		ttl := s.certainTTL(sess, start)
		for i, k := range keys {
			st := readState(rs[2*i : 2*i+2])
			r := &out[lo+i]
			if !st.ours(k) {
				s.forget(k)
				r.Err = driver.NotHeld(st.taken(k))
				continue
			}
			holds, err := s.learn(k, sess, reqs[lo+i].Token, st.own)
			if r.Err = err; err == nil {
				r.Grant = driver.Grant{Fence: uint64(st.own.CreateRevision), Holds: holds, TTL: ttl}
			}
		}
	}
	return out
}
