package etcdstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"example.com/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ driver.Breaker = (*Store)(nil)

// brokenMark is the value of a broken holding's mark (see brokenKey).
const brokenMark = "dlock/1 broken"

// brokenKey is the etcd key of the mark Break leaves for the holding at
// etcd key k: Prefix + "dlock-broken." + a digest of k. It has no "/" after
// the prefix, so it lies under no lock's prefix (Prefix+N+"/"): it blocks
// no lock, and List skips it.
func (s *Store) brokenKey(k string) string {
	sum := sha256.Sum256([]byte(k))
	return s.prefix + "dlock-broken." + hex.EncodeToString(sum[:16])
}

// Break implements driver.Breaker: it deletes the holder's key and marks the
// holder's own etcd lease, so its next Extend or Release answers
// driver.NotHeld(taken); fences stay rising (revisions). A free key returns
// Held false and changes nothing; a key held through a longer name (a/b for
// a) matches driver.ErrRefused, changing nothing; a value that is not a
// lock is deleted (NotALock). Other errors match no sentinel: the break may
// or may not have happened (docs/etcd.md, "Breaking a lock").
func (s *Store) Break(ctx context.Context, key string) (driver.BrokenHolding, error) {
	// One compare-and-set deletes the oldest key under the lock's prefix
	// (dlock's or etcdctl lock's) and puts the mark on the holder's lease,
	// so the mark lasts no longer than its session. A holding the token
	// had through another Store's session answers NotHeld(false): only the
	// session's Store knows its key. Waiters queued behind the holder are
	// woken by the delete. An etcdctl lock holder is not told.
	if err := driver.ValidateKey(key); err != nil {
		return driver.BrokenHolding{}, err
	}
	pfx := s.pfx(key)
	for range maxAttempts {
		first, err := s.holder(ctx, pfx)
		if err != nil {
			return driver.BrokenHolding{}, fmt.Errorf("etcdstore: break %q: %w", key, err)
		}
		if first == nil {
			return driver.BrokenHolding{}, nil
		}
		if strings.Contains(strings.TrimPrefix(string(first.Key), pfx), "/") {
			return driver.BrokenHolding{}, fmt.Errorf("%w: etcdstore: break %q: it is held through the lock %q, whose name extends it: break that one",
				driver.ErrRefused, key, strings.TrimPrefix(string(first.Key)[:strings.LastIndexByte(string(first.Key), '/')], s.prefix))
		}
		b, err := s.breakKey(ctx, first)
		if errors.Is(err, errChanged) {
			continue
		}
		return b, err
	}
	return driver.BrokenHolding{}, fmt.Errorf("etcdstore: break %q: the key kept changing", key)
}

// breakKey deletes kv, the holder's key, if it is unchanged, and marks it
// broken; errChanged if it changed or its lease ended meanwhile.
func (s *Store) breakKey(ctx context.Context, kv *mvccpb.KeyValue) (driver.BrokenHolding, error) {
	var b driver.BrokenHolding
	if _, err := parseValue(kv.Value); err != nil {
		b = driver.BrokenHolding{Info: driver.Info{Held: true, Remaining: -1}, NotALock: true}
	} else if b.Info, err = s.info(ctx, kv); err != nil {
		return driver.BrokenHolding{}, err
	}
	ops := []clientv3.Op{clientv3.OpDelete(string(kv.Key))}
	if kv.Lease != 0 && !b.NotALock {
		ops = append(ops, clientv3.OpPut(s.brokenKey(string(kv.Key)), brokenMark, clientv3.WithLease(clientv3.LeaseID(kv.Lease))))
	}
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).Then(ops...).Commit()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return driver.BrokenHolding{}, errChanged // the holder's session ended and took its key
	case err != nil:
		return driver.BrokenHolding{}, fmt.Errorf("etcdstore: break: %w", err)
	case !resp.Succeeded:
		return driver.BrokenHolding{}, errChanged
	}
	return b, nil
}

// wasBroken reports whether Break ended this Store's holding filed under
// handle k (see ownKey): the holding is still filed and its mark is there.
// Both stay until the session ends, so that every later Extend or Release
// by the token answers the same; the holding's key name stays reserved
// meanwhile, so no new holding shares the mark. It is called only when the
// token was found not to hold the key: a holding that is alive never pays
// for it. A failed read reports false.
func (s *Store) wasBroken(ctx context.Context, k string) bool {
	h, ok := s.lookup(k)
	if k == "" || !ok {
		return false
	}
	resp, err := s.cli.Get(ctx, s.brokenKey(h.k))
	return err == nil && len(resp.Kvs) > 0 && clientv3.LeaseID(resp.Kvs[0].Lease) == h.lease
}
