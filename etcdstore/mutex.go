package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxAttempts bounds the compare-and-set retries of one call when the key
// changes under it.
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

// Acquire implements driver.Mutex. The first acquisition is one transaction
// that puts our key only if no key exists under the lock's prefix; a
// re-entry is a compare-and-set of the hold count (also of a holding the
// token has through another Store's session). ttl is ignored: the holding
// lasts as long as the session. A contended key returns a
// *driver.ContendedError with Remaining -1 and changes nothing. A client
// etcd refuses (no user name on a cluster with authentication enabled, a
// role without access to the prefix) gets an error matching
// driver.ErrRefused.
func (s *Store) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, _, err := s.acquire(ctx, key, token, "")
	return g, authRefused(err)
}

// acquire is Acquire that also reads the resource key read (if not empty)
// in the acquiring transaction, right after its put. A contended or failed
// acquisition reads nothing.
func (s *Store) acquire(ctx context.Context, key, token, read string) (driver.Grant, driver.Value, error) {
	start := time.Now()
	sess, err := s.session(ctx)
	if err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	dig := digest(token)
	k, pfx := s.ownKey(sess, key, dig), s.pfx(key)
	for range maxAttempts {
		h, cached := s.lookup(k)
		var txn clientv3.Txn
		if cached {
			txn = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(h.k), "=", h.mod)).
				Then(withRead(read, clientv3.OpPut(h.k, valueMeta(h.holds+1, dig, h.vfence, h.meta), clientv3.WithLease(sess.id)))...)
		} else {
			h = holding{k: s.newName(sess, pfx), lease: sess.id, token: token, meta: driver.MetaFrom(ctx)}
			txn = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix()).
				Then(withRead(read, clientv3.OpPut(h.k, valueMeta(1, dig, 0, h.meta), clientv3.WithLease(sess.id)))...)
		}
		resp, err := txn.Else(readOps(h.k, pfx)...).Commit()
		if err != nil {
			return driver.Grant{}, driver.Value{}, fmt.Errorf("etcdstore: acquire %q: %w", key, err) // h.k stays reserved: the put may have been applied
		}
		if !cached && !resp.Succeeded {
			s.freeName(h.k) // the put was not applied
		}
		if resp.Succeeded {
			rev := resp.Header.Revision
			if !cached {
				h.create, h.fence = rev, rev
			}
			h.mod, h.holds = rev, h.holds+1
			fence := s.remember(k, h)
			return driver.Grant{Fence: uint64(fence), Holds: h.holds, TTL: s.certainTTL(sess, start)}, readValue(read, resp.Responses), nil
		}
		st := readState(resp.Responses)
		holds, ok := mine(st.first, dig)
		switch {
		case ok && clientv3.LeaseID(st.first.Lease) == sess.id:
			s.remember(k, holdingOf(st.first, holds, token))
			continue // re-enter with what we read
		case ok:
			g, v, err := s.reenterForeign(ctx, st.first, holds, dig, start, read)
			if errors.Is(err, errChanged) {
				continue
			}
			return g, v, err
		}
		s.forget(k)
		if st.first != nil {
			return driver.Grant{}, driver.Value{}, &driver.ContendedError{Remaining: -1}
		}
	}
	return driver.Grant{}, driver.Value{}, fmt.Errorf("etcdstore: acquire %q: the key kept changing", key)
}

// errChanged reports a compare-and-set that found the key changed.
var errChanged = errors.New("etcdstore: key changed")

// reenterForeign adds a hold to kv, the token's holding in another
// session: a keepalive of that session (for the grant's TTL), then a
// compare-and-set (that also reads the resource key read, if not empty).
func (s *Store) reenterForeign(ctx context.Context, kv *mvccpb.KeyValue, holds int, dig string, start time.Time, read string) (driver.Grant, driver.Value, error) {
	ttl, err := s.keepAliveLease(ctx, clientv3.LeaseID(kv.Lease), start)
	if err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	v, _ := parseValue(kv.Value)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
		Then(withRead(read, clientv3.OpPut(string(kv.Key), valueMeta(holds+1, dig, v.fence, v.meta), clientv3.WithLease(clientv3.LeaseID(kv.Lease))))...).Commit()
	if err != nil {
		return driver.Grant{}, driver.Value{}, fmt.Errorf("etcdstore: acquire: %w", err)
	}
	if !resp.Succeeded {
		return driver.Grant{}, driver.Value{}, errChanged
	}
	return driver.Grant{Fence: uint64(fenceOf(kv)), Holds: holds + 1, TTL: ttl}, readValue(read, resp.Responses), nil
}

// keepAliveLease renews a lease that is not the store's session (a holding
// of the same token through another Store) and returns how long it is
// certain to last from start; errChanged if the lease is gone.
func (s *Store) keepAliveLease(ctx context.Context, id clientv3.LeaseID, start time.Time) (time.Duration, error) {
	sent := time.Now()
	resp, err := s.cli.KeepAliveOnce(ctx, id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0) {
		return 0, errChanged
	}
	if err != nil {
		return 0, fmt.Errorf("etcdstore: keepalive: %w", err)
	}
	return sent.Add(time.Duration(resp.TTL) * time.Second).Sub(start), nil
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

// holder reads the first-created key under pfx (nil if none).
func (s *Store) holder(ctx context.Context, pfx string) (*mvccpb.KeyValue, error) {
	resp, err := s.cli.Get(ctx, pfx, clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		return nil, err
	}
	return resp.Kvs[0], nil
}

// Release implements driver.Mutex. If token does not hold key it changes
// nothing and returns driver.NotHeld (ErrTaken when another holder's key is
// first, ErrExpired when none is). A ctx already ended returns ctx's error
// at once, sending and changing nothing: the holding stays until a Release
// with a live context or the session's end. Any other error (etcd's, or the
// key changing under four attempts in a row, or ctx ending in flight)
// matches no sentinel or ctx's: the hold may or may not have been removed.
func (s *Store) Release(ctx context.Context, key, token string) error {
	// One compare-and-set on the holding key's ModRevision lowers the hold
	// count or deletes the key, so a retried or stale release cannot delete
	// a newer holding. The store's own holdings take one round trip; a
	// holding of the token through another session is read first.
	_, err := s.release(ctx, key, token, nil, "")
	return err
}

// release is Release that also puts w (if not nil) and then reads the
// resource key read (if not empty) in the releasing transaction, under the
// same ownership compare: a refused release reads and writes nothing.
func (s *Store) release(ctx context.Context, key, token string, w *driver.Write, read string) (driver.Value, error) {
	if err := ctx.Err(); err != nil {
		return driver.Value{}, fmt.Errorf("etcdstore: release %q: nothing sent, the lock is still held: %w", key, err)
	}
	dig, pfx := digest(token), s.pfx(key)
	var k string
	if sess := s.live(); sess != nil {
		k = s.ownKey(sess, key, dig)
	}
	reread := false
	for range maxAttempts {
		h, cached := s.lookup(k)
		if !cached || reread {
			first, err := s.holder(ctx, pfx)
			if err != nil {
				return driver.Value{}, fmt.Errorf("etcdstore: release %q: %w", key, err)
			}
			holds, ok := mine(first, dig)
			if !ok {
				if first == nil && s.wasBroken(ctx, k) {
					return driver.Value{}, driver.NotHeld(true)
				}
				s.forget(k)
				return driver.Value{}, driver.NotHeld(first != nil)
			}
			h = holdingOf(first, holds, token)
			h.fence = s.remember(k, h) // keeps a queued holding's fence
		}
		resp, err := s.cli.Txn(ctx).If(ownerGuard(h)).Then(releaseOps(h, dig, w, read)...).Commit()
		if err != nil {
			return driver.Value{}, fmt.Errorf("etcdstore: release %q: %w", key, err)
		}
		if !resp.Succeeded {
			reread = true
			continue
		}
		switch {
		case h.holds <= 1:
			s.forget(k)
			s.freeName(h.k) // releaseOps deleted it
		case k != "":
			h.mod, h.holds = resp.Header.Revision, h.holds-1
			s.remember(k, h)
		default:
			s.forget(k)
		}
		return readValue(read, resp.Responses), nil
	}
	return driver.Value{}, fmt.Errorf("etcdstore: release %q: the key kept changing", key)
}

// Extend implements driver.Mutex: one keepalive of the session (shared with
// concurrent Extends) and one read confirming that token still holds key.
// ttl is ignored; Grant.TTL is how long the session is certain to last.
// If token does not hold key (the session expired and took the key, or it
// was released) it returns driver.NotHeld; a keepalive or read that gets
// no answer returns etcd's error, wrapped, matching no sentinel: the
// holding may still be alive, as far as the session's certain life.
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	rs := s.ExtendBatch(ctx, []driver.ExtendRequest{{Key: key, Token: token, TTL: ttl}})
	return rs[0].Grant, rs[0].Err
}

// batchSize bounds the reads per transaction (under etcd's default limit of
// 128 operations per transaction).
const batchSize = 120

// ExtendBatch implements driver.BatchExtender: one keepalive for the
// session, then one read transaction per 120 keys. A holding of a
// token through another Store's session is renewed with a keepalive of that
// session. Each result is what Extend would return; a failed keepalive of
// the store's session fails every request with its error.
func (s *Store) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	start := time.Now()
	out := make([]driver.ExtendResult, len(reqs))
	sess := s.live()
	if sess != nil {
		if err := s.keepAlive(ctx, sess); errors.Is(err, errSessionGone) {
			sess = nil
		} else if err != nil {
			for i := range out {
				out[i].Err = err
			}
			return out
		}
	}
	for lo := 0; lo < len(reqs); lo += batchSize {
		hi := min(lo+batchSize, len(reqs))
		ops := make([]clientv3.Op, 0, hi-lo)
		for _, r := range reqs[lo:hi] {
			ops = append(ops, clientv3.OpGet(s.pfx(r.Key), clientv3.WithFirstCreate()...))
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		for i := lo; i < hi; i++ {
			if err != nil {
				out[i].Err = fmt.Errorf("etcdstore: extend: %w", err)
				continue
			}
			var first *mvccpb.KeyValue
			if kvs := resp.Responses[i-lo].GetResponseRange().GetKvs(); len(kvs) > 0 {
				first = kvs[0]
			}
			out[i] = s.extendOne(ctx, sess, first, reqs[i].Key, reqs[i].Token, start)
		}
	}
	return out
}

// extendOne turns the holder read for one request into its result.
func (s *Store) extendOne(ctx context.Context, sess *session, first *mvccpb.KeyValue, key, token string, start time.Time) driver.ExtendResult {
	dig := digest(token)
	holds, ok := mine(first, dig)
	if !ok {
		taken := first != nil || sess != nil && s.wasBroken(ctx, s.ownKey(sess, key, dig))
		return driver.ExtendResult{Err: driver.NotHeld(taken)}
	}
	g := driver.Grant{Fence: uint64(fenceOf(first)), Holds: holds}
	if sess != nil && clientv3.LeaseID(first.Lease) == sess.id {
		g.Fence = uint64(s.remember(s.ownKey(sess, key, dig), holdingOf(first, holds, token)))
		g.TTL = s.certainTTL(sess, start)
		return driver.ExtendResult{Grant: g}
	}
	ttl, err := s.keepAliveLease(ctx, clientv3.LeaseID(first.Lease), start)
	if errors.Is(err, errChanged) {
		return driver.ExtendResult{Err: driver.NotHeld(false)}
	}
	g.TTL = ttl
	return driver.ExtendResult{Grant: g, Err: err}
}
