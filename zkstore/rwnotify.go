package zkstore

import (
	"context"
	"errors"

	"example.com/dlock/driver"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// SubscribeRW implements driver.RWNotifier with a children watch on the
// lock path (an exists watch while it does not exist), set again after
// each event. A value is sent when a node that held the lock (by
// Curator's rules, in the previous listing) is gone: a release, a
// downgrade (its writer's node is deleted), a holder's session ending.
// Creations (acquisitions, queued writers) and a queued writer's mark
// withdrawn send nothing. If the path's child version moved by more than
// the listings show, a node came and went between them and a value is
// sent too (it may have been a holding). The subscription lasts until
// cancel; after a connection failure it lists again with a backoff of up
// to a second.
func (s *Store) SubscribeRW(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := s.checkRWKey(key); err != nil {
		return nil, nil, err
	}
	return s.subscribe(ctx, key, s.rwPath(key), rwSorted, released)
}

// subscribe watches lp's children (those keep returns, in order) and
// sends on the channel when gone says a release happened between two
// listings, until cancel.
func (s *Store) subscribe(ctx context.Context, key, lp string, keep func([]string) []string, gone func(prev, cur rwList) bool) (<-chan struct{}, func(), error) {
	prev, ev, err := s.rwWatch(ctx, key, lp, keep)
	if err != nil {
		return nil, nil, err
	}
	ch := make(chan struct{}, 1)
	stop := make(chan struct{})
	go s.rwWatchLoop(key, lp, keep, gone, prev, ev, ch, stop)
	var once sync.Once
	return ch, func() { once.Do(func() { close(stop) }) }, nil
}

// rwWatch lists lp with a watch: a children watch, or an exists watch if
// lp does not exist.
func (s *Store) rwWatch(ctx context.Context, key, lp string, keep func([]string) []string) (rwList, <-chan zk.Event, error) {
	for range maxAttempts {
		var kids []string
		var st *zk.Stat
		var ev <-chan zk.Event
		err := s.read(ctx, func() error {
			var e error
			kids, st, ev, e = s.conn.ChildrenW(lp)
			return e
		})
		if err == nil {
			return rwList{nodes: keep(kids), cversion: st.Cversion, exists: true}, ev, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return rwList{}, nil, wrapErr("watch", key, err)
		}
		var ok bool
		err = s.read(ctx, func() error {
			var e error
			ok, _, ev, e = s.conn.ExistsW(lp)
			return e
		})
		if err != nil {
			return rwList{}, nil, wrapErr("watch", key, err)
		}
		if !ok {
			return rwList{}, ev, nil
		}
	}
	return rwList{}, nil, wrapErr("watch", key, errors.New("the lock path kept appearing and vanishing"))
}

// rwWatchLoop waits for each watch event, lists again with a new watch and
// sends on ch when gone says so, until stop is closed.
func (s *Store) rwWatchLoop(key, lp string, keep func([]string) []string, gone func(prev, cur rwList) bool, prev rwList, ev <-chan zk.Event, ch chan<- struct{}, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-ev:
		case <-stop:
			return
		}
		cur, next, err := s.rwWatch(ctx, key, lp, keep)
		for err != nil {
			select {
			case <-stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			cur, next, err = s.rwWatch(ctx, key, lp, keep)
		}
		backoff = 50 * time.Millisecond
		if gone(prev, cur) {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		prev, ev = cur, next
	}
}

// released reports whether a node that held in prev is missing from cur,
// or nodes came and went unseen between the two listings.
func released(prev, cur rwList) bool {
	seen := 0
	for i, n := range prev.nodes {
		if !slices.Contains(cur.nodes, n) {
			if rwHolds(prev.nodes, i) {
				return true
			}
			seen++
		}
	}
	for _, n := range cur.nodes {
		if !slices.Contains(prev.nodes, n) {
			seen++
		}
	}
	if !cur.exists {
		return false
	}
	base := int32(0)
	if prev.exists {
		base = prev.cversion
	}
	return cur.cversion-base > int32(seen)
}

// leaseGone reports whether a lease node of prev is missing from cur, or
// nodes came and went unseen between the two listings (an acquisition and
// its release).
func leaseGone(prev, cur rwList) bool {
	seen := 0
	for _, n := range prev.nodes {
		if !slices.Contains(cur.nodes, n) {
			return true
		}
	}
	for _, n := range cur.nodes {
		if !slices.Contains(prev.nodes, n) {
			seen++
		}
	}
	if !cur.exists {
		return false
	}
	base := int32(0)
	if prev.exists {
		base = prev.cversion
	}
	return cur.cversion-base > int32(seen)
}

// SubscribePermits implements driver.PermitNotifier with a children watch
// on the semaphore's leases (an exists watch while they do not exist), set
// again after each event: a value is sent when a lease node is gone (a
// release, a holder's session ending, a Curator lease closed), or nodes
// came and went between two listings. Acquisitions send nothing. The
// subscription lasts until cancel.
func (s *Store) SubscribePermits(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := driver.ValidateKey(key); err != nil {
		return nil, nil, err
	}
	if err := s.checkSemKey(key); err != nil {
		return nil, nil, err
	}
	leases := func(kids []string) []string {
		return slices.DeleteFunc(slices.Clone(kids), func(c string) bool { return !isLeaseNode(c) })
	}
	return s.subscribe(ctx, key, s.semPath(key)+"/"+semLeases, leases, leaseGone)
}
