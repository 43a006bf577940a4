package zkstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"example.com/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// cleanupTimeout bounds the deletion of a waiter's node after its call
// ended.
const cleanupTimeout = 5 * time.Second

// AcquireQueued implements driver.Queuer with Curator's queue: it creates
// our node (protected create), lists the lock path and, while another node
// is before ours in Curator's order, watches only the node just before ours
// (its predecessor: FIFO, no herd) with a watch that fires when it is
// deleted, listing again when that watch fires or the predecessor is
// already gone (with a sync beside the listing when the session needs
// confirming). Curator's waiters queue in the same order. When ours is
// first the call returns the grant, with the fence the package
// documentation's Fence section describes. If our node disappears (the session expired) it
// returns an error matching driver.ErrNotAcquired. When it returns any
// error it deletes its node (if that fails, the node goes with the session
// and is recorded for deletion by the next call on the lock).
func (s *Store) AcquireQueued(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := s.checkKey(key); err != nil {
		return driver.Grant{}, err
	}
	start := time.Now()
	if g, ok, err := s.reenter(ctx, key, token, start); ok || err != nil {
		return g, err
	}
	lp := s.lockPath(key)
	meta := driver.MetaFrom(ctx)
	c, err := s.create(ctx, key, lp, nodeData(1, digest(token), "", meta))
	if err != nil {
		return driver.Grant{}, err
	}
	nodes, pz, err := s.listAndStat(ctx, key, lp, &c)
	for err == nil {
		var pred string
		if pred, err = s.predecessor(key, lp, c, nodes); err != nil || pred == "" {
			break
		}
		if err = s.awaitGone(ctx, key, lp+"/"+pred); err == nil {
			nodes, pz, err = s.wokenChildren(ctx, key, lp)
		}
	}
	if err != nil {
		s.withdraw(ctx, lp, c)
		return driver.Grant{}, err
	}
	return s.grant(key, token, c, pz, start, meta), nil
}

// wokenChildren lists lp again (with its pzxid, see grantFence) after the
// predecessor's watch fired (or it was gone already): the server that sent
// the event applied the deletion, so the listing's pzxid is at least its
// zxid. The listing needs no sync to be fresh enough: the
// watch event reached us before any read that could miss the deletion, and
// a lagging server can only show more nodes before ours, never fewer (a
// node sorting before ours is never created later). What a stale listing
// cannot tell is that our own session still lives (a server cut off from
// the leader goes on answering reads while the leader may expire the
// session and delete our node). So a grant needs a leader-confirmed reply:
// if the session is already certain for at least half its timeout from now
// (a recent write of this store, such as our create, confirmed it), the
// listing alone is enough; otherwise a sync, which goes through the leader,
// is sent beside the listing, in the same round trip, and must succeed.
func (s *Store) wokenChildren(ctx context.Context, key, lp string) ([]string, int64, error) {
	if s.certainTTL(s.conn.SessionID(), time.Now()) >= s.currentTimeout()/2 {
		return s.childrenZ(ctx, key, lp)
	}
	var serr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		serr = s.sync(ctx, lp)
	}()
	nodes, pz, err := s.childrenZ(ctx, key, lp)
	<-done
	if serr != nil {
		return nil, 0, wrapErr("sync", key, serr)
	}
	return nodes, pz, err
}

// predecessor returns the node just before ours in nodes ("" if ours is
// first), or an error if ours is gone or the sequence wrapped.
func (s *Store) predecessor(key, lp string, c created, nodes []string) (string, error) {
	i := slices.Index(nodes, c.name)
	switch {
	case i < 0:
		return "", fmt.Errorf("%w: zkstore: our node for %q is gone while waiting: the session expired", driver.ErrNotAcquired, key)
	case wrapped(nodes):
		return "", errWrapped(lp)
	case i == 0:
		return "", nil
	}
	return nodes[i-1], nil
}

// awaitGone returns when the node at path is gone (or its watch ended: the
// caller lists again), or ctx's error. The watch is a children watch on
// the node itself (getChildren with a watch, one request, as exists with a
// watch would be): a lock node is ephemeral and has no children, so the
// watch fires only on its deletion, whereas an exists watch also fires on
// every setData of the node, which a holder's local handoff (Transfer) and
// re-entry are: each would cost the waiter a wasted wake-up, a listing and
// a new watch (TestWaiterNotWokenByTransfers).
func (s *Store) awaitGone(ctx context.Context, key, path string) error {
	var ch <-chan zk.Event
	err := s.read(ctx, func() error {
		var e error
		if s.existsWatch {
			var ok bool
			if ok, _, ch, e = s.conn.ExistsW(path); e == nil && !ok {
				e = zk.ErrNoNode
			}
			return e
		}
		_, _, ch, e = s.conn.ChildrenW(path)
		return e
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil // gone already: list again at once
	}
	if err != nil {
		return wrapErr("watch the predecessor for", key, err)
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("zkstore: waiting for %q: %w", key, context.Cause(ctx))
	}
}

// withdraw deletes our waiting node, detached from ctx (which has usually
// ended) and bounded by cleanupTimeout; if it cannot, the node is recorded
// as an orphan.
func (s *Store) withdraw(ctx context.Context, lp string, c created) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := s.deleteNode(cctx, c.path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		s.addOrphan(lp, uuidOf(c.name))
	}
}
