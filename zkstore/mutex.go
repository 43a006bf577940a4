package zkstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"example.com/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// maxAttempts bounds the compare-and-set retries of one call when a node
// changes under it.
const maxAttempts = 4

// lockNodes returns the lock nodes among children (isLockNode), in
// Curator's order. Other children (the container of a nested lock name)
// are not participants for this store; Curator counts them too, so it
// waits where this store would not (more exclusion, never less). Leaving
// them out keeps Curator's relative order of the lock nodes (the sort is
// stable), so a lock node first for Curator is first here too.
func lockNodes(children []string) []string { return filterSorted(children, isLockNode) }

// participants is lockNodes, or with looseNames every child with "lock-"
// (the rule before nested names were made independent: tests' control).
func (s *Store) participants(children []string) []string {
	return filterSorted(children, s.isParticipant)
}

// isParticipant is isLockNode, or with looseNames whether c has "lock-".
func (s *Store) isParticipant(c string) bool {
	if s.looseNames {
		return strings.Contains(c, lockMarker)
	}
	return isLockNode(c)
}

// filterSorted returns the children that keep accepts, in Curator's order.
func filterSorted(children []string, keep func(string) bool) []string {
	out := make([]string, 0, len(children))
	for _, c := range children {
		if keep(c) {
			out = append(out, c)
		}
	}
	sortChildren(out)
	return out
}

// checkKey is checkName for key with the store's prefix (nil with
// looseNames).
func (s *Store) checkKey(key string) error {
	if s.looseNames {
		return nil
	}
	return checkName(s.prefix + key)
}

// children reads the lock nodes of lp in Curator's order, without this
// store's orphans (which it deletes); none if lp does not exist.
func (s *Store) children(ctx context.Context, key, lp string) ([]string, error) {
	nodes, _, err := s.childrenZ(ctx, key, lp)
	return nodes, err
}

// childrenZ is children with the lock path's pzxid as of the listing: the
// zxid of the last creation or deletion of one of its children, so at
// least the zxid of every deletion the listing reflects.
func (s *Store) childrenZ(ctx context.Context, key, lp string) ([]string, int64, error) {
	var kids []string
	var st *zk.Stat
	err := s.read(ctx, func() error {
		var e error
		kids, st, e = s.conn.Children(lp)
		return e
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, wrapErr("list", key, err)
	}
	return s.participants(s.sweep(ctx, lp, kids)), st.Pzxid, nil
}

// grantFence is the fence of a holding whose node was created at czxid and
// found first by a listing at pzxid. Every earlier holding of the key ended
// by the deletion of its node, which the listing reflects, and its fence
// (its czxid, a transfer's zxid, or this same rule) came before that
// deletion: so the later of czxid and pzxid is greater than every earlier
// fence, also when a holder handed the lock on (Transfer) while our node
// was already queued, which czxid alone would not be. A listing that shows
// our node reflects its creation, so pzxid >= czxid and the fence is the
// pzxid: the callers pass czxid 0 when they did not read it (the usual
// case: no request is spent on it; TestGrantFenceIsTheListingsPzxid).
func grantFence(czxid, pzxid int64) int64 { return max(czxid, pzxid) }

// Acquire implements driver.Mutex. A first acquisition lists the lock path:
// if it has lock nodes (a holder, or waiters ahead) it returns a
// *driver.ContendedError with Remaining -1 (ZooKeeper has no per-key expiry
// to report) after that one read, with nothing written. Otherwise it
// creates our node (Curator's protected create: the node's name carries a
// new UUID per attempt, so a create whose reply was lost is found again),
// then lists the lock path: 3 round trips, one write, when free (the node's
// stat is not read). If another node got in first it deletes ours and
// returns the same error. (Creating first saves that first read on a free
// lock but costs two writes on a held one: BenchmarkAcquireStrategy
// measured a contended try about 12 times slower that way, 6 ms against
// 0.5 ms, while the extra read on a free lock was lost in the noise of the
// writes. Waiting callers use AcquireQueued, which creates first.) A
// re-entry by the token holding key through this store is one conditional
// setData of the hold count. ttl is ignored: the holding lasts as long as
// the session.
//
// A token that holds key through another Store (another session) cannot
// re-enter it here: Acquire reports contention.
//
// A key that checkName refuses (a "/"-separated part after the first named
// like a lock node, "lock-" and a 10-digit sequence at its end: see the
// package doc's Layout) gets an error matching driver.ErrInvalid before any
// request, as it does from every other call of the store.
func (s *Store) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := s.checkKey(key); err != nil {
		return driver.Grant{}, err
	}
	start := time.Now()
	if g, ok, err := s.reenter(ctx, key, token, start); ok || err != nil {
		return g, err
	}
	lp := s.lockPath(key)
	if !s.createFirst {
		if nodes, err := s.children(ctx, key, lp); err != nil || len(nodes) > 0 {
			if err == nil {
				err = &driver.ContendedError{Remaining: -1}
			}
			return driver.Grant{}, err
		}
	}
	meta := driver.MetaFrom(ctx)
	c, err := s.create(ctx, key, lp, nodeData(1, digest(token), "", meta))
	if err != nil {
		return driver.Grant{}, err
	}
	nodes, pz, err := s.listAndStat(ctx, key, lp, &c)
	if err != nil {
		return driver.Grant{}, err
	}
	if len(nodes) > 0 && nodes[0] == c.name && !wrapped(nodes) {
		return s.grant(key, token, c, pz, start, meta), nil
	}
	if err := s.deleteNode(ctx, c.path, c.version()); err != nil {
		s.addOrphan(lp, uuidOf(c.name))
		return driver.Grant{}, wrapErr("withdraw from", key, err)
	}
	if wrapped(nodes) {
		return driver.Grant{}, errWrapped(lp)
	}
	return driver.Grant{}, &driver.ContendedError{Remaining: -1}
}

// listAndStat lists lp's lock nodes (with lp's pzxid) and, if c's owner
// session is unknown (see create), reads its stat, both requests at once
// (one round trip). On error our node is recorded as an orphan, deleted by
// the next call on lp.
func (s *Store) listAndStat(ctx context.Context, key, lp string, c *created) ([]string, int64, error) {
	var serr error
	var done chan struct{}
	if c.owner() == 0 || s.statCreate {
		done = make(chan struct{})
		go func() {
			defer close(done)
			var c2 created
			c2, serr = s.statCreated(ctx, key, c.path)
			c.stat = c2.stat
		}()
	}
	nodes, pz, err := s.childrenZ(ctx, key, lp)
	if done != nil {
		<-done
	}
	if err == nil {
		err = serr
	}
	if err != nil {
		s.addOrphan(lp, uuidOf(c.name))
		return nil, 0, err
	}
	return nodes, pz, nil
}

// grant records the holding of key by token on our node c (created with
// holder metadata meta), found first by a listing at pzxid pz, and returns
// its grant.
func (s *Store) grant(key, token string, c created, pz int64, start time.Time, meta string) driver.Grant {
	h := &holding{path: c.path, sid: c.owner(), czxid: c.czxid(), fence: grantFence(c.czxid(), pz), version: c.version(), holds: 1, token: token, meta: meta}
	s.remember(key, h)
	return driver.Grant{Fence: uint64(h.fence), Holds: 1, TTL: s.certainTTL(h.sid, start)}
}

// reenter adds a hold if the store holds key for token in the conn's
// current session; ok false if it does not (then the caller acquires).
func (s *Store) reenter(ctx context.Context, key, token string, start time.Time) (driver.Grant, bool, error) {
	for range maxAttempts {
		h, ok := s.lookup(key, token)
		if !ok {
			return driver.Grant{}, false, nil
		}
		var st *zk.Stat
		err := s.write(ctx, func() error {
			var e error
			st, e = s.conn.Set(h.path, h.data(h.holds+1), h.version)
			return e
		})
		switch {
		case err == nil:
			h.holds, h.version = h.holds+1, st.Version
			s.remember(key, h)
			return driver.Grant{Fence: uint64(h.fence), Holds: h.holds, TTL: s.certainTTL(h.sid, start)}, true, nil
		case errors.Is(err, zk.ErrNoNode):
			s.forget(key, h.path) // gone (deleted, or the session expired): acquire anew
			return driver.Grant{}, false, nil
		case errors.Is(err, zk.ErrBadVersion):
			if err := s.reload(ctx, key, h); err != nil {
				return driver.Grant{}, false, err
			}
		default:
			return driver.Grant{}, false, wrapErr("re-enter", key, err)
		}
	}
	return driver.Grant{}, false, wrapErr("re-enter", key, errors.New("the node kept changing"))
}

// reload reads h's node again after a version mismatch and records its
// hold count and version, or forgets it if it is gone or no longer the
// token's.
func (s *Store) reload(ctx context.Context, key string, h *holding) error {
	var data []byte
	var st *zk.Stat
	err := s.read(ctx, func() error {
		var e error
		data, st, e = s.conn.Get(h.path)
		return e
	})
	if errors.Is(err, zk.ErrNoNode) {
		s.forget(key, h.path)
		return nil
	}
	if err != nil {
		return wrapErr("read", key, err)
	}
	d, ok := parseData(data)
	if !ok || d.dig != digest(h.token) {
		s.forget(key, h.path)
		return nil
	}
	h.holds, h.version, h.fence = d.holds, st.Version, fenceOf(d, st.Czxid, st.Mzxid)
	s.remember(key, h)
	return nil
}

// firstNode reads the data and stat of the first lock node of lp (the
// holder); nil stat if there is none.
func (s *Store) firstNode(ctx context.Context, key, lp string) (name string, data []byte, st *zk.Stat, err error) {
	for range maxAttempts {
		nodes, err := s.children(ctx, key, lp)
		if err != nil || len(nodes) == 0 {
			return "", nil, nil, err
		}
		err = s.read(ctx, func() error {
			var e error
			data, st, e = s.conn.Get(lp + "/" + nodes[0])
			return e
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // released meanwhile: list again
		}
		if err != nil {
			return "", nil, nil, wrapErr("read", key, err)
		}
		return nodes[0], data, st, nil
	}
	return "", nil, nil, wrapErr("read", key, errors.New("the holder kept changing"))
}

// notHeld is the error for a token that does not hold key: taken if some
// lock node is there.
func (s *Store) notHeld(ctx context.Context, key string) error {
	nodes, err := s.children(ctx, key, s.lockPath(key))
	if err != nil {
		return err
	}
	return driver.NotHeld(len(nodes) > 0)
}

// errOtherSession is returned for a token holding key through another
// session: this store can neither renew nor re-enter it.
func errOtherSession(key string) error {
	return fmt.Errorf("%w: zkstore: the token holds %q through another ZooKeeper session (another Store): extend or re-enter it there", driver.ErrInvalid, key)
}
