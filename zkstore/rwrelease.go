package zkstore

import (
	"context"
	"errors"
	"strconv"
	"time"

	"example.com/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// downgrade turns the write holding h into a read holding with the same
// fence: it creates a plain ephemeral reader's node whose name carries the
// writer's sequence (so it sorts where the writer's node did: before every
// writer queued meanwhile, for this store's and Curator's clients alike),
// then deletes the writer's node, then lists for the readers' count. If
// the deletion fails the writer's node is recorded as an orphan (deleted
// by the next call on the lock) and the error says the outcome is unknown:
// the token holds the key for reading, and maybe still for writing.
func (s *Store) downgrade(ctx context.Context, key, token, lp string, h *rwHolding, ttl time.Duration, start time.Time) (driver.RWGrant, error) {
	seq := rwSortKey(h.name)
	name := func(uuid string) string { return protectedPrefix + uuid + "-" + rwReadMarker + seq }
	flags := int32(zk.FlagEphemeral)
	if s.seqDowngrade {
		name, flags = rwNodeName(rwReadMarker), zk.FlagEphemeralSequential
	}
	c, err := s.createNode(ctx, key, lp, name, flags, rwData(digest(token), strconv.FormatInt(h.fence, 10)))
	if err != nil {
		return driver.RWGrant{}, err
	}
	if c.owner() == 0 {
		if c, err = s.statCreated(ctx, key, c.path); err != nil {
			return driver.RWGrant{}, err
		}
	}
	r := &rwHolding{path: c.path, name: c.name, sid: c.owner(), mode: driver.RWRead, granted: true, fence: h.fence, version: c.version()}
	s.rwRemember(key, token, r)
	if err := s.deleteNode(ctx, h.path, h.version); err != nil {
		s.addOrphan(lp, uuidOf(h.name))
		return driver.RWGrant{}, wrapErr("downgrade (delete the writer's node)", key, err)
	}
	l, err := s.rwChildren(ctx, key, lp)
	if err != nil {
		return driver.RWGrant{}, err
	}
	return driver.RWGrant{Mode: driver.RWRead, Fence: uint64(r.fence), Readers: rwReaders(l.nodes), TTL: min(s.certainTTL(r.sid, start), ttl)}, nil
}

// rwTaken is the error of a refused acquisition, from the nodes ahead
// (the caller's own left out): readers that hold, and whether the first
// node is a writer's that holds or one of this store's queued writers
// (read from its data: one more round trip). Remaining is -1: a holding
// lasts as long as its session.
func (s *Store) rwTaken(ctx context.Context, key, lp string, nodes []string) error {
	te := &driver.RWTakenError{Readers: rwReaders(nodes), Remaining: -1}
	writers := 0
	for _, n := range nodes {
		if rwIsWrite(n) {
			writers++
		}
	}
	switch {
	case te.Readers > 0:
		te.Held, te.WriterWaiting = driver.RWRead, writers > 0
	case len(nodes) > 0:
		te.Held, te.WriterWaiting = driver.RWWrite, writers > 1
		var data []byte
		err := s.read(ctx, func() error {
			var e error
			data, _, e = s.conn.Get(lp + "/" + nodes[0])
			return e
		})
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return wrapErr("read the first node of", key, err)
		}
		if _, state, ok := parseRWData(data); errors.Is(err, zk.ErrNoNode) || (ok && state == rwWaiting) {
			te.Held, te.WriterWaiting = 0, true // a queued writer's node, first but not granted (or gone meanwhile)
		}
	}
	return te
}

// ExtendRW implements driver.RWMutex: a sync (which confirms the session)
// and a listing that shows our node: 2 round trips, no write. ttl is
// ignored; the grant's TTL is how long the session is certain to last, at
// most ttl. A token whose holding lives in another session (another
// Store) gets an error matching driver.ErrInvalid; a token that holds
// nothing (a queued writer's mark included) NotHeld(false).
func (s *Store) ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if err := s.checkRW(key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	start := time.Now()
	lp := s.rwPath(key)
	h, ok := s.rwLookup(key, token)
	if ok && !h.granted {
		return driver.RWGrant{}, driver.NotHeld(false) // a queued writer's mark
	}
	h, err := heldHere(key, h, ok, func() (*rwHolding, error) { return s.rwForeign(ctx, key, token, lp) })
	if err != nil {
		return driver.RWGrant{}, err
	}
	g, err := s.rwConfirm(ctx, key, token, lp, h, ttl, start)
	return g, goneIsNotHeld(err)
}

// ReleaseRW implements driver.RWMutex: one delete of our node, by its
// version, which wakes the key's waiters (a Curator waiter watches the
// node, a subscriber the lock path). A holding of the token through
// another session (another Store) is found by the token's digest in the
// nodes' data (a read of each node) and deleted too. A queued writer's
// mark is not a holding: NotHeld(false), and it stays. If the node is
// already gone while the store's session lives, a release of the token
// (a resent one, or another Store's) ran: nil. A ctx already done
// changes nothing; a connection failure leaves the holding recorded and
// the outcome unknown (call again).
func (s *Store) ReleaseRW(ctx context.Context, key, token string) error {
	if err := checkRelease(ctx, key, s.checkRWKey); err != nil {
		return err
	}
	lp := s.rwPath(key)
	h, ok := s.rwLookup(key, token)
	if ok && !h.granted {
		return driver.NotHeld(false)
	}
	h, err := heldAnywhere(h, ok, func() (*rwHolding, error) { return s.rwForeign(ctx, key, token, lp) })
	if err != nil {
		return err
	}
	err = s.write(ctx, func() error { return s.conn.Delete(h.path, h.version) })
	switch {
	case err == nil:
		s.rwForget(key, token, h)
		return nil
	case errors.Is(err, zk.ErrNoNode) && ok && h.sid == s.conn.SessionID():
		s.rwForget(key, token, h)
		return nil
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		s.rwForget(key, token, h)
		return driver.NotHeld(false)
	}
	return wrapErr("release", key, err)
}

// rwForeign finds the token's granted node of key that this store has not
// recorded, by the token's digest in the nodes' data (one read of each
// node, all at once); nil if there is none.
func (s *Store) rwForeign(ctx context.Context, key, token, lp string) (*rwHolding, error) {
	l, err := s.rwChildren(ctx, key, lp)
	if err != nil || len(l.nodes) == 0 {
		return nil, err
	}
	dig := digest(token)
	var found *rwHolding
	err = s.readNodes(ctx, lp, l.nodes, func(n string, data []byte, st *zk.Stat) {
		if d, state, ok := parseRWData(data); ok && d == dig && state != rwWaiting {
			mode := driver.RWRead
			if rwIsWrite(n) {
				mode = driver.RWWrite
			}
			found = &rwHolding{path: lp + "/" + n, name: n, sid: st.EphemeralOwner, mode: mode, granted: true,
				fence: rwFenceOf(state, st.Mzxid), version: st.Version}
		}
	})
	if found == nil && err != nil {
		return nil, wrapErr("read the nodes of", key, err)
	}
	return found, nil
}
