package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// cleanupTimeout bounds the deletion of a waiter's key after its call ended.
const cleanupTimeout = 5 * time.Second

// putDropTimeout bounds the deletion of a key whose put had no answer.
const putDropTimeout = 300 * time.Millisecond

// AcquireQueued implements driver.Queuer with concurrency.Mutex's queue: it
// puts our key under the lock's prefix and waits, watching only its
// predecessor, until ours is first; waiters (etcdctl's too) are served in
// creation order. If the session expires meanwhile it returns an error
// matching driver.ErrNotAcquired; a client etcd refuses gets
// driver.ErrRefused. On error it deletes the key it put (guarded by its
// CreateRevision, also after a put without a reply); failing that, the key
// goes with the session.
func (s *Store) AcquireQueued(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, _, err := s.acquireQueued(ctx, key, token, "")
	return g, authRefused(err)
}

// AcquireQueuedRead implements driver.QueueReader: AcquireQueued that also
// reads the resource key resource in the transaction that makes token the
// holder (its put when the key is free, else the read that finds no
// predecessor left), so the value is the one at the revision the holding
// starts: what the previous holder committed with its release (Apply), and
// nothing later. A resource inside the lock prefix is refused as by Apply,
// before any I/O. On error it reads nothing and leaves nothing, as
// AcquireQueued.
func (s *Store) AcquireQueuedRead(ctx context.Context, key, token string, ttl time.Duration, resource string) (driver.Grant, driver.Value, error) {
	if resource != "" {
		if err := s.checkResource(key, resource); err != nil {
			return driver.Grant{}, driver.Value{}, err
		}
	}
	g, v, err := s.acquireQueued(ctx, key, token, resource)
	return g, v, authRefused(err)
}

// acquireQueued is AcquireQueued reading the resource key read (if not
// empty) with the grant.
func (s *Store) acquireQueued(ctx context.Context, key, token, read string) (driver.Grant, driver.Value, error) {
	start := time.Now()
	sess, err := s.session(ctx)
	if err != nil {
		return driver.Grant{}, driver.Value{}, err
	}
	handle, pfx, dig := s.ownKey(sess, key, digest(token)), s.pfx(key), digest(token)
	if _, ok := s.lookup(handle); ok {
		return s.acquire(ctx, key, token, read) // re-entry (of a transferred holding too)
	}
	if !s.startWaiting(handle) {
		return driver.Grant{}, driver.Value{}, fmt.Errorf("%w: etcdstore: token is already waiting for %q", driver.ErrInvalid, key)
	}
	defer s.stopWaiting(handle)
	// Our put is the newest creation under pfx, so the two last-created keys
	// after it are ours and our predecessor (if any): the first round trip
	// both queues us and tells whether we hold the lock already.
	k, resp, err := s.enqueue(ctx, sess, pfx, dig, read)
	if err != nil {
		// The put may have been applied (ctx ended with it in flight): take
		// our key out of the queue, or it would stay with the session. The
		// name k is this call's alone (newName). Bounded by putDropTimeout:
		// when the server is unreachable the put was not applied either, and
		// the caller's wait bound is not held up.
		if k != "" {
			s.dropKey(ctx, k, clientv3.Compare(clientv3.Value(k), "=", valueMeta(1, dig, 0, driver.MetaFrom(ctx))), putDropTimeout)
		}
		return driver.Grant{}, driver.Value{}, fmt.Errorf("etcdstore: acquire %q: %w", key, err)
	}
	if !resp.Succeeded { // the token holds the key through a holding this store has not filed
		return s.acquire(ctx, key, token, read) // re-entry
	}
	w := &waiter{s: s, sess: sess, key: key, token: token, handle: handle, k: k, pfx: pfx, rev: resp.Header.Revision, read: read}
	var pred *mvccpb.KeyValue
	if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) == 2 && kvs[0].CreateRevision == w.rev {
		pred = kvs[1]
	} else if len(kvs) == 1 && kvs[0].CreateRevision == w.rev {
		w.s.remember(handle, holding{k: k, lease: sess.id, create: w.rev, mod: w.rev, holds: 1, fence: w.rev, token: token, meta: driver.MetaFrom(ctx)})
		return driver.Grant{Fence: uint64(w.rev), Holds: 1, TTL: s.certainTTL(sess, start)}, readValue(read, resp.Responses), nil
	}
	g, v, err := w.wait(ctx, start, pred)
	if err != nil {
		w.cleanup(ctx)
	}
	return g, v, err
}

// enqueue puts the token's (digest dig) key on the lock prefix pfx under a
// free name, reading the two last-created keys (and read, if set) in the same
// transaction, and returns the name and the reply. A name found taken (its
// key outlived a deletion this store could not confirm) stays reserved and
// the next free one is tried; the reply is unsucceeded only when the key's
// holder is the token itself (a re-entry).
func (s *Store) enqueue(ctx context.Context, sess *session, pfx, dig, read string) (string, *clientv3.TxnResponse, error) {
	lastTwo := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2)}
	for range maxAttempts {
		k := s.newName(sess, pfx)
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(withRead(read, clientv3.OpPut(k, valueMeta(1, dig, 0, driver.MetaFrom(ctx)), clientv3.WithLease(sess.id)), clientv3.OpGet(pfx, lastTwo...))...).
			Else(readOps(k, pfx)...).Commit()
		if err != nil || resp.Succeeded {
			return k, resp, err
		}
		if _, ok := mine(readState(resp.Responses).first, dig); ok {
			return k, resp, nil
		}
	}
	return "", nil, fmt.Errorf("%d key names taken: %w", maxAttempts, errChanged)
}

// waiter is one AcquireQueued call's key in the queue.
type waiter struct {
	s      *Store
	sess   *session
	key    string
	token  string
	handle string // ownKey: where the holding is filed
	k, pfx string // our etcd key, and the lock's prefix
	rev    int64  // our key's CreateRevision
	read   string // the resource key read with the grant, if any
}

// wait loops: watch the predecessor pred (and our own key) for deletion, if
// pred is known (nil otherwise); then read our key and our predecessor (and the resource
// w.read, in the same read); none → ours is the lock. Its fence is the revision of that read, not our key's
// CreateRevision: a holder of this Store's may have handed the lock on
// (Transfer) while we were queued, with a fence greater than our
// CreateRevision but below the revision at which its key was deleted.
func (w *waiter) wait(ctx context.Context, start time.Time, pred *mvccpb.KeyValue) (driver.Grant, driver.Value, error) {
	if pred != nil {
		if err := w.await(ctx, pred); err != nil {
			return driver.Grant{}, driver.Value{}, err
		}
	}
	for {
		resp, err := w.s.cli.Txn(ctx).Then(withRead(w.read, clientv3.OpGet(w.k),
			clientv3.OpGet(w.pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(w.rev-1))...))...).Commit()
		if err != nil {
			return driver.Grant{}, driver.Value{}, fmt.Errorf("etcdstore: acquire %q: %w", w.key, err)
		}
		own, pred := resp.Responses[0].GetResponseRange().GetKvs(), resp.Responses[1].GetResponseRange().GetKvs()
		if len(own) == 0 || own[0].CreateRevision != w.rev {
			return driver.Grant{}, driver.Value{}, w.gone()
		}
		if len(pred) == 0 {
			v, err := parseValue(own[0].Value)
			if err != nil {
				return driver.Grant{}, driver.Value{}, err
			}
			h := holding{k: w.k, lease: w.sess.id, create: w.rev, mod: own[0].ModRevision, holds: v.holds, fence: resp.Header.Revision, vfence: v.fence, token: w.token, meta: v.meta}
			fence := w.s.remember(w.handle, h)
			return driver.Grant{Fence: uint64(fence), Holds: v.holds, TTL: w.s.certainTTL(w.sess, start)}, readValue(w.read, resp.Responses), nil
		}
		if err := w.await(ctx, pred[0]); err != nil {
			return driver.Grant{}, driver.Value{}, err
		}
	}
}

// gone is the error for a waiter whose key vanished: its session expired.
func (w *waiter) gone() error {
	w.s.mu.Lock()
	w.s.markDeadLocked(w.sess)
	w.s.mu.Unlock()
	return fmt.Errorf("%w: etcdstore: the session expired while waiting for %q", driver.ErrNotAcquired, w.key)
}

// await returns when the predecessor key pred (its name and CreateRevision,
// below ours) is deleted (or the watch broke: the caller reads again),
// keeping the session alive meanwhile. It returns an error when our own key
// is deleted, the session can no longer be trusted, or ctx ends.
func (w *waiter) await(ctx context.Context, kv *mvccpb.KeyValue) error {
	pred := string(kv.Key)
	if hook := w.s.hookBeforeWatch(); hook != nil {
		hook(pred)
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// Watches from the current revision, not from rev: the server delivers
	// a watch that starts in the past only after its next sync of lagging
	// watchers (every 100 ms), which under steady writes is the common
	// case and would add tens of milliseconds to each handover. What a
	// watch from now misses (pred deleted before it was registered) the
	// read after the registration sees: by CreateRevision, since the name
	// may be a new key by then (names are reused, newName).
	predc := w.s.cli.Watch(wctx, pred, clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	ownc := w.s.cli.Watch(wctx, w.k, clientv3.WithFilterPut())
	if gone, err := w.registered(ctx, predc, pred, kv.CreateRevision); gone || err != nil {
		return err
	}
	tick := time.NewTicker(w.s.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case wr, ok := <-predc:
			if !ok || wr.Err() != nil || hasDelete(wr.Events) {
				return ctx.Err() // nil unless ctx ended: read again
			}
		case wr, ok := <-ownc:
			if ok && wr.Err() == nil && hasDelete(wr.Events) {
				return w.gone()
			}
			if !ok || wr.Err() != nil {
				return ctx.Err()
			}
		case <-tick.C:
			err := w.s.keepAlive(ctx, w.sess)
			if errors.Is(err, errSessionGone) {
				return w.gone()
			}
			if err != nil && !time.Now().Before(w.s.certainDeadline(w.sess)) {
				return fmt.Errorf("%w: etcdstore: the session can no longer be trusted while waiting for %q: %w", driver.ErrNotAcquired, w.key, err)
			}
		case <-ctx.Done():
			return fmt.Errorf("etcdstore: waiting for %q: %w", w.key, context.Cause(ctx))
		}
	}
}

// registered waits for the watch on pred to be registered, then reports
// whether the key pred created at revision create is gone already (deleted
// before the watch could see it), also when a key of that name exists but
// was created later: a name freed and reused (newName), maybe by a waiter
// queued behind us, which would wait for us while we waited for it. A
// watch that failed reports gone, so that the caller reads again.
func (w *waiter) registered(ctx context.Context, predc clientv3.WatchChan, pred string, create int64) (gone bool, err error) {
	select {
	case wr, ok := <-predc:
		if !ok || wr.Err() != nil || hasDelete(wr.Events) {
			return true, ctx.Err()
		}
	case <-ctx.Done():
		return true, fmt.Errorf("etcdstore: waiting for %q: %w", w.key, context.Cause(ctx))
	}
	resp, err := w.s.cli.Get(ctx, pred, clientv3.WithKeysOnly())
	if err != nil {
		return true, nil // read again (the caller's read reports the error)
	}
	return len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != create, nil
}

func hasDelete(evs []*clientv3.Event) bool {
	for _, e := range evs {
		if e.Type == mvccpb.DELETE {
			return true
		}
	}
	return false
}

// cleanup deletes our key if it is still the one we put.
func (w *waiter) cleanup(ctx context.Context) {
	w.s.dropKey(ctx, w.k, clientv3.Compare(clientv3.CreateRevision(w.k), "=", w.rev), cleanupTimeout)
}

// dropKey deletes k if guard holds, detached from ctx (which has usually
// ended) and bounded by timeout, best effort: the key goes with the
// session otherwise.
func (s *Store) dropKey(ctx context.Context, k string, guard clientv3.Cmp, timeout time.Duration) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if _, err := s.cli.Txn(cctx).If(guard).Then(clientv3.OpDelete(k)).Commit(); err == nil {
		s.freeName(k) // deleted, or not ours (the guard failed): either way our key k is gone
	}
}

// certainDeadline is when sess stops being certain.
func (s *Store) certainDeadline(sess *session) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sess.certain
}

// hookBeforeWatch is s.beforeWatch (a test's hook), or nil.
func (s *Store) hookBeforeWatch() func(pred string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.beforeWatch
}
