package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Transfer implements driver.Transferer (a Client's local handoff): one
// compare-and-set rewrites the holder's key to the recipient's token digest
// and a fence greater than every earlier one of the key and below any later
// holding's; the key keeps its place in etcd's queue (docs/etcd.md "Local
// handoff"). ttl is ignored; Grant.TTL is how long the session is certain to
// last. If from does not hold key it returns driver.NotHeld and changes
// nothing; if from holds it more than once, driver.ErrInvalid. An error
// matching no sentinel leaves the outcome unknown.
func (s *Store) Transfer(ctx context.Context, key, from, to string, ttl time.Duration) (driver.Grant, error) {
	g, _, err := s.transfer(ctx, key, from, to, nil, "")
	return g, err
}

// transfer is Transfer that also puts w (if not nil) and then reads the
// resource key read (if not empty) in the rewriting transaction, under the
// same ownership compare: a refused transfer reads and writes nothing.
func (s *Store) transfer(ctx context.Context, key, from, to string, w *driver.Write, read string) (driver.Grant, driver.Value, error) {
	// The new fence is the previous holding's plus one (for a holding this
	// Store has no record of, one more than the revision of the read that
	// found it): at most the rewrite's revision, so below the fence of any
	// later holding (a waiter takes its confirming read's revision, see
	// AcquireQueued). It is written into the value for any Store to read
	// back; the previous holder's OwnerCmp fails from the rewrite on.
	start := time.Now()
	digFrom, digTo, pfx := digest(from), digest(to), s.pfx(key)
	sess := s.live()
	var k string
	if sess != nil {
		k = s.ownKey(sess, key, digFrom)
	}
	for range maxAttempts {
		h, cached := s.lookup(k)
		fence := h.fence + 1
		if !cached {
			var err error
			if h, fence, err = s.readHolding(ctx, pfx, digFrom, from); err != nil {
				return driver.Grant{}, driver.Value{}, fmt.Errorf("etcdstore: transfer %q: %w", key, err)
			}
		}
		if h.holds > 1 {
			return driver.Grant{}, driver.Value{}, fmt.Errorf("%w: etcdstore: transfer %q: the holding is re-entered (%d holds)", driver.ErrInvalid, key, h.holds)
		}
		if err := s.renewFor(ctx, sess, h.lease); err != nil {
			return driver.Grant{}, driver.Value{}, fmt.Errorf("etcdstore: transfer %q: %w", key, err)
		}
		resp, err := s.cli.Txn(ctx).If(ownerGuard(h)).Then(transferOps(h, digTo, fence, w, read)...).Commit()
		if err != nil {
			return driver.Grant{}, driver.Value{}, fmt.Errorf("etcdstore: transfer %q: %w", key, err)
		}
		s.forget(k)
		if !resp.Succeeded {
			continue // the key changed: read it again
		}
		v := readValue(read, resp.Responses)
		next := holding{k: h.k, lease: h.lease, create: h.create, mod: resp.Header.Revision, holds: 1, fence: fence, vfence: fence, token: to, meta: h.meta}
		if sess != nil && h.lease == sess.id {
			s.remember(s.ownKey(sess, key, digTo), next)
			return driver.Grant{Fence: uint64(fence), Holds: 1, TTL: s.certainTTL(sess, start)}, v, nil
		}
		// A holding of from through another Store's session stays in it.
		left, err := s.keepAliveLease(ctx, h.lease, start)
		if errors.Is(err, errChanged) {
			return driver.Grant{}, driver.Value{}, fmt.Errorf("etcdstore: transfer %q: the holding's session ended: %w", key, driver.NotHeld(false))
		}
		if err != nil {
			return driver.Grant{}, driver.Value{}, fmt.Errorf("etcdstore: transfer %q: %w", key, err)
		}
		return driver.Grant{Fence: uint64(fence), Holds: 1, TTL: left}, v, nil
	}
	return driver.Grant{}, driver.Value{}, fmt.Errorf("etcdstore: transfer %q: the key kept changing", key)
}

// readHolding reads the holder of the lock prefix pfx and returns it as the
// holding of token (digest dig) and the fence a transfer of it gets: one
// more than the read's revision. It returns driver.NotHeld if token is not
// the holder.
func (s *Store) readHolding(ctx context.Context, pfx, dig, token string) (holding, int64, error) {
	resp, err := s.cli.Get(ctx, pfx, clientv3.WithFirstCreate()...)
	if err != nil {
		return holding{}, 0, err
	}
	if len(resp.Kvs) == 0 {
		return holding{}, 0, driver.NotHeld(false)
	}
	first := resp.Kvs[0]
	holds, ok := mine(first, dig)
	if !ok {
		return holding{}, 0, driver.NotHeld(true)
	}
	return holdingOf(first, holds, token), resp.Header.Revision + 1, nil
}

// renewFor makes sure a transferred holding in lease gets a useful grant:
// if lease is the store's session and less than half its TTL is certain, it
// is renewed first (one keepalive, shared). It returns driver.NotHeld if
// the session is gone.
func (s *Store) renewFor(ctx context.Context, sess *session, lease clientv3.LeaseID) error {
	if sess == nil || lease != sess.id || s.certainTTL(sess, time.Now()) >= s.ttl/2 {
		return nil
	}
	err := s.keepAlive(ctx, sess)
	if errors.Is(err, errSessionGone) {
		return driver.NotHeld(false)
	}
	return err
}
