package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The lock family (Semaphore, RWMutex) shares one layout: the keys of
// primitive key K live under
//
//	Prefix + tag + K + "\xff"
//
// where tag is "\xffsem/" or "\xffrw/". The byte 0xff never occurs in a
// valid UTF-8 key (driver.ValidateKey), so no Mutex key's prefix (Prefix +
// K + "/") covers them, and the "\xff" after K ends the name: semaphore
// "a" does not cover semaphore "a/b". Each holding is one key named after
// its token's digest, on the session lease of the Store that took it; its
// CreateRevision is its fence.

const (
	semTag = "\xffsem/"
	rwTag  = "\xffrw/"
)

// famAttempts bounds the guarded transactions of one acquisition when
// other callers change the key's holdings between its read and its write.
const famAttempts = 16

// famPfx is the etcd prefix of the keys of primitive key (tag semTag or
// rwTag).
func (s *Store) famPfx(tag, key string) string { return s.prefix + tag + key + "\xff" }

// fresh is the guard of a first try: nothing under rng.
func fresh(rng string) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(rng), "=", 0).WithPrefix()
}

// unchangedSince is the guard of a try after a read at rev: no key under
// rng was created or written since (deletions only free room).
func unchangedSince(rng string, rev int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(rng), "<", rev+1).WithPrefix()
}

// admitGuard is the guard of a try after a read at rev of the keys under
// rng: unchangedSince, or, for a test's negative control (unguarded), one
// that always holds.
func (s *Store) admitGuard(rng string, rev int64) clientv3.Cmp {
	if s.unguarded {
		return unchangedSince(rng, math.MaxInt64-1)
	}
	return unchangedSince(rng, rev)
}

// putIf puts k=v on sess's lease (and runs more) if every guard holds; either way it reads the
// keys under rng in the same transaction (after the put). It returns
// whether it put, the transaction's revision and the keys read. If the
// server no longer has the session's lease, it marks the session dead and
// returns errSessionGone: nothing was put.
func (s *Store) putIf(ctx context.Context, sess *session, guards []clientv3.Cmp, k, v, rng string, more ...clientv3.Op) (bool, int64, []*mvccpb.KeyValue, error) {
	get := clientv3.OpGet(rng, clientv3.WithPrefix())
	then := append([]clientv3.Op{clientv3.OpPut(k, v, clientv3.WithLease(sess.id))}, more...)
	resp, err := s.cli.Txn(ctx).If(guards...).Then(append(then, get)...).Else(get).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.mu.Lock()
		s.markDeadLocked(sess)
		s.mu.Unlock()
		return false, 0, nil, errSessionGone
	}
	if err != nil {
		return false, 0, nil, authRefused(err)
	}
	rs := resp.Responses
	return resp.Succeeded, resp.Header.Revision, rs[len(rs)-1].GetResponseRange().GetKvs(), nil
}

// holdTTL is how long, from start, the holding on lease is certain to
// last: the session's certain life for the store's own session, else a
// keepalive of that lease (a holding of the token through another Store);
// errChanged if that lease is gone.
func (s *Store) holdTTL(ctx context.Context, sess *session, lease clientv3.LeaseID, start time.Time) (time.Duration, error) {
	if sess != nil && lease == sess.id {
		return s.certainTTL(sess, start), nil
	}
	return s.keepAliveLease(ctx, lease, start)
}

// renewed returns the store's session after one keepalive (nil if it has
// none or the server says it is gone), for ExtendPermits and ExtendRW.
func (s *Store) renewed(ctx context.Context) (*session, error) {
	sess := s.live()
	if sess == nil {
		return nil, nil
	}
	err := s.keepAlive(ctx, sess)
	if errors.Is(err, errSessionGone) {
		return nil, nil
	}
	return sess, err
}

// deleteIfPresent deletes k if it exists: true if it did.
func (s *Store) deleteIfPresent(ctx context.Context, k string) (bool, error) {
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), ">", 0)).Then(clientv3.OpDelete(k)).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// leaseTTLs returns the remaining time of each distinct lease of kvs, as
// the server reports it (leases it no longer has are left out).
func (s *Store) leaseTTLs(ctx context.Context, kvs []*mvccpb.KeyValue) (map[int64]time.Duration, error) {
	out := map[int64]time.Duration{}
	for _, kv := range kvs {
		if _, ok := out[kv.Lease]; ok || kv.Lease == 0 {
			continue
		}
		resp, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil {
			return nil, err
		}
		if resp.TTL >= 0 {
			out[kv.Lease] = max(time.Duration(resp.TTL)*time.Second, time.Millisecond)
		}
	}
	return out, nil
}

// subscribe watches the keys under pfx and sends a value on the returned
// channel (capacity 1, coalesced) for each event wake accepts, once the
// watch is registered on the server. A broken watch is restarted from the
// revision after the last one seen, with a wake-up (the caller reads
// again). cancel ends it and waits for its goroutine. It returns by ctx's
// end even when the connection answers nothing.
func (s *Store) subscribe(ctx context.Context, pfx string, wake func(*clientv3.Event) bool) (<-chan struct{}, func(), error) {
	wctx, stop := context.WithCancel(clientv3.WithRequireLeader(context.WithoutCancel(ctx)))
	// The watch outlives ctx once registered, but clientv3's Watch waits
	// for its stream with the context it is given: until then, ctx's end
	// ends it.
	unhook := context.AfterFunc(ctx, stop)
	wc := s.cli.Watch(wctx, pfx, clientv3.WithPrefix(), clientv3.WithCreatedNotify(), clientv3.WithPrevKV())
	select {
	case wr, ok := <-wc:
		if !unhook() { // ctx ended and stopped the watch
			return nil, nil, fmt.Errorf("etcdstore: watch %q: %w", pfx, context.Cause(ctx))
		}
		if !ok || wr.Err() != nil || !wr.Created {
			stop()
			return nil, nil, fmt.Errorf("etcdstore: watch %q: not registered: %v", pfx, wr.Err())
		}
	case <-ctx.Done():
		stop()
		return nil, nil, fmt.Errorf("etcdstore: watch %q: %w", pfx, context.Cause(ctx))
	}
	ch := make(chan struct{}, 1)
	send := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last int64
		for wctx.Err() == nil {
			for wr := range wc {
				if wr.Err() != nil {
					if wr.CompactRevision > 0 { // what is gone cannot be replayed: from the oldest kept
						last = wr.CompactRevision - 1
					}
					break
				}
				last = max(last, wr.Header.Revision)
				for _, e := range wr.Events {
					if wake(e) {
						send()
					}
				}
			}
			if wctx.Err() != nil {
				return
			}
			send() // the watch broke: the caller reads again
			opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV()}
			if last > 0 {
				opts = append(opts, clientv3.WithRev(last+1))
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-wctx.Done():
				return
			}
			wc = s.cli.Watch(wctx, pfx, opts...)
		}
	}()
	var once sync.Once
	return ch, func() { once.Do(func() { stop(); wg.Wait() }) }, nil
}
