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

// The read-write lock (driver.RWMutex) in Curator's InterProcessReadWriteLock
// layout: each holding, and each queued writer, is an ephemeral sequential
// node of the store's session under the lock path, named as Curator names
// them, in one queue ordered by sequence. A reader holds when no writer's
// node is before its own, a writer when its node is first: so a queued
// writer keeps every later reader out (writer preference), and Curator's
// clients and this store share one lock. Holdings last as long as the
// session; ttl is ignored (the Model is session-based), and a grant's TTL
// is how long the session is certain to last, at most ttl.
//
// The writer-waiting mark of driver.RWMutex is the refused writer's node
// itself, left in the queue: it keeps later readers out as a queued
// Curator writer does. The store withdraws it (deletes the node)
// driver.WriterWaitTTL after the writer's last AcquireWrite, or at once
// if the session ends.

// rwKey names a token's node of a read-write lock key in this store.
type rwKey struct{ key, token string }

// rwHolding is a read-write lock node the store created for a token: a
// holding (granted) or a queued writer (the mark).
type rwHolding struct {
	path, name string
	sid        int64
	mode       driver.RWMode
	granted    bool
	fence      int64
	version    int32
	timer      *time.Timer // a queued writer's: withdraws the node
}

func (s *Store) rwLookup(key, token string) (*rwHolding, bool) {
	sid := s.conn.SessionID()
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.rw[rwKey{key, token}]
	if ok && h.sid != sid {
		delete(s.rw, rwKey{key, token})
		return nil, false
	}
	return h, ok
}

func (s *Store) rwRemember(key, token string, h *rwHolding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.rw[rwKey{key, token}] = h
	}
}

// rwForget drops the token's record if it is still h.
func (s *Store) rwForget(key, token string, h *rwHolding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rw[rwKey{key, token}] == h {
		delete(s.rw, rwKey{key, token})
	}
}

// rwList is a listing of a lock path: its read-write lock nodes in
// Curator's order.
type rwList struct {
	nodes    []string
	cversion int32
	exists   bool
}

// rwChildren lists lp's read-write lock nodes, without this store's
// orphans (which it deletes); none if lp does not exist.
func (s *Store) rwChildren(ctx context.Context, key, lp string) (rwList, error) {
	var kids []string
	var st *zk.Stat
	err := s.read(ctx, func() error {
		var e error
		kids, st, e = s.conn.Children(lp)
		return e
	})
	if errors.Is(err, zk.ErrNoNode) {
		return rwList{}, nil
	}
	if err != nil {
		return rwList{}, wrapErr("list", key, err)
	}
	nodes := rwSorted(s.sweep(ctx, lp, kids))
	if rwWrapped(nodes) {
		return rwList{}, errWrapped(lp)
	}
	return rwList{nodes: nodes, cversion: st.Cversion, exists: true}, nil
}

// AcquireRead implements driver.RWMutex. A first acquisition lists the
// lock path: if a writer's node is there (a writer holds or is queued),
// a new node would sort after it, so the call returns a
// *driver.RWTakenError with nothing written. Otherwise it creates our
// reader's node (protected create), lists again and, if still no writer's
// node is before ours, grants the holding by a setData on our node, whose
// mzxid is the fence: 4 round trips. If a writer got in between, it
// deletes its node and reports the key taken. A re-entry by a reader
// confirms the session and the node (as ExtendRW); by the writer it is a
// downgrade: a plain ephemeral reader's node with the writer's sequence in
// its name is created, then the writer's node deleted, so that the
// downgraded holding stays before every queued writer (CURATOR-621 let a
// queued writer in here). A token whose holding lives in another session
// (another Store) gets an error matching driver.ErrInvalid.
func (s *Store) AcquireRead(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if err := s.checkRW(key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	start := time.Now()
	lp := s.rwPath(key)
	if h, ok := s.rwLookup(key, token); ok && h.granted {
		if h.mode == driver.RWWrite {
			return s.downgrade(ctx, key, token, lp, h, ttl, start)
		}
		g, err := s.rwConfirm(ctx, key, token, lp, h, ttl, start)
		if !errors.Is(err, errGone) {
			return g, err
		}
	}
	l, err := s.rwChildren(ctx, key, lp)
	if err != nil {
		return driver.RWGrant{}, err
	}
	if slices.ContainsFunc(l.nodes, rwIsWrite) {
		return driver.RWGrant{}, s.rwTaken(ctx, key, lp, l.nodes)
	}
	h, l, err := s.rwEnqueue(ctx, key, token, lp, driver.RWRead)
	if err != nil {
		return driver.RWGrant{}, err
	}
	if i := slices.Index(l.nodes, h.name); !rwHolds(l.nodes, i) {
		s.withdraw(ctx, lp, created{name: h.name, path: h.path})
		return driver.RWGrant{}, s.rwTaken(ctx, key, lp, slices.Delete(l.nodes, i, i+1))
	}
	return s.rwGrant(ctx, key, token, h, rwReaders(l.nodes), ttl, start)
}

// AcquireWrite implements driver.RWMutex. A first call creates our
// writer's node and lists the lock path: if ours is first it grants the
// holding by a setData (3 round trips); otherwise the node stays queued as
// the writer-waiting mark (see above) and the call returns a
// *driver.RWTakenError. A later call by the same token through this store
// lists again (1 round trip) and grants the holding once its node is
// first. By a reader of key it returns driver.ErrUpgrade, changing
// nothing; by the writer it is a re-entry (as ExtendRW).
func (s *Store) AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if err := s.checkRW(key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	start := time.Now()
	lp := s.rwPath(key)
	h, ok := s.rwLookup(key, token)
	switch {
	case ok && h.mode == driver.RWRead:
		return driver.RWGrant{}, driver.ErrUpgrade
	case ok && h.granted:
		g, err := s.rwConfirm(ctx, key, token, lp, h, ttl, start)
		if !errors.Is(err, errGone) {
			return g, err
		}
		ok = false
	case ok && !h.timer.Stop():
		ok = false // the mark is being withdrawn: queue anew
	}
	var l rwList
	var err error
	if ok {
		if l, err = s.rwChildren(ctx, key, lp); err != nil {
			s.rwArm(key, token, lp, h)
			return driver.RWGrant{}, err
		}
		if !slices.Contains(l.nodes, h.name) {
			s.rwForget(key, token, h) // deleted with the session, or by another Store's ReleaseRW
			return driver.RWGrant{}, fmt.Errorf("%w: zkstore: our queued writer's node for %q is gone: the session expired", driver.ErrNotAcquired, key)
		}
	} else if h, l, err = s.rwEnqueue(ctx, key, token, lp, driver.RWWrite); err != nil {
		return driver.RWGrant{}, err
	}
	if l.nodes[0] == h.name {
		return s.rwGrant(ctx, key, token, h, 0, ttl, start)
	}
	s.rwArm(key, token, lp, h)
	s.rwRemember(key, token, h)
	return driver.RWGrant{}, s.rwTaken(ctx, key, lp, slices.DeleteFunc(l.nodes, func(n string) bool { return n == h.name }))
}

// checkRW is driver.ValidateRW and checkRWKey.
func (s *Store) checkRW(key string, ttl time.Duration) error {
	if err := driver.ValidateRW(key, ttl); err != nil {
		return err
	}
	return s.checkRWKey(key)
}

// rwEnqueue creates the token's node in mode (not yet granted) and lists
// the lock path; our node is in the listing.
func (s *Store) rwEnqueue(ctx context.Context, key, token, lp string, mode driver.RWMode) (*rwHolding, rwList, error) {
	marker := rwReadMarker
	if mode == driver.RWWrite {
		marker = rwWriteMarker
	}
	c, err := s.createNode(ctx, key, lp, rwNodeName(marker), zk.FlagEphemeralSequential, rwData(digest(token), rwWaiting))
	if err != nil {
		return nil, rwList{}, err
	}
	if c.owner() == 0 {
		if c, err = s.statCreated(ctx, key, c.path); err != nil {
			return nil, rwList{}, err
		}
	}
	l, err := s.rwChildren(ctx, key, lp)
	if err == nil && !slices.Contains(l.nodes, c.name) {
		err = fmt.Errorf("%w: zkstore: our node for %q vanished: the session expired", driver.ErrNotAcquired, key)
	}
	if err != nil {
		s.withdraw(ctx, lp, c)
		return nil, rwList{}, err
	}
	return &rwHolding{path: c.path, name: c.name, sid: c.owner(), mode: mode, version: c.version()}, l, nil
}

// rwGrant makes h a holding: a setData of our node (by its version) whose
// mzxid is the fence. Every earlier holding that could conflict ended by
// the deletion of its node, which the listing that let us in reflects, so
// the setData comes after it and its zxid is above that holding's fence;
// and no two writes share a zxid. If the setData fails the node is
// withdrawn.
func (s *Store) rwGrant(ctx context.Context, key, token string, h *rwHolding, readers int, ttl time.Duration, start time.Time) (driver.RWGrant, error) {
	var st *zk.Stat
	err := s.write(ctx, func() error {
		var e error
		st, e = s.conn.Set(h.path, rwData(digest(token), rwGranted), h.version)
		return e
	})
	if err != nil {
		s.rwForget(key, token, h)
		s.withdraw(ctx, s.rwPath(key), created{name: h.name, path: h.path})
		if errors.Is(err, zk.ErrNoNode) {
			return driver.RWGrant{}, fmt.Errorf("%w: zkstore: our node for %q is gone: the session expired", driver.ErrNotAcquired, key)
		}
		return driver.RWGrant{}, wrapErr("grant", key, err)
	}
	h.granted, h.fence, h.version, h.timer = true, st.Mzxid, st.Version, nil
	s.rwRemember(key, token, h)
	return driver.RWGrant{Mode: h.mode, Fence: uint64(h.fence), Readers: readers, TTL: min(s.certainTTL(h.sid, start), ttl)}, nil
}

// rwArm (re)starts the queued writer's mark: WriterWaitTTL from now the
// node is deleted, unless a call of the token stops the timer first.
func (s *Store) rwArm(key, token, lp string, h *rwHolding) {
	h.timer = time.AfterFunc(driver.WriterWaitTTL, func() {
		s.rwForget(key, token, h)
		if err := s.conn.Delete(h.path, h.version); err != nil && !errors.Is(err, zk.ErrNoNode) {
			s.addOrphan(lp, uuidOf(h.name))
		}
	})
}

// errGone reports a holding whose node is gone (the caller acquires anew).
var errGone = errors.New("zkstore: node gone")

// rwConfirm is a re-entry or an extension of h: a sync (which confirms
// the session) and a listing; errGone if our node is not in it.
func (s *Store) rwConfirm(ctx context.Context, key, token, lp string, h *rwHolding, ttl time.Duration, start time.Time) (driver.RWGrant, error) {
	if err := s.sync(ctx, lp); err != nil {
		return driver.RWGrant{}, wrapErr("sync", key, err)
	}
	l, err := s.rwChildren(ctx, key, lp)
	if err != nil {
		return driver.RWGrant{}, err
	}
	if !slices.Contains(l.nodes, h.name) {
		s.rwForget(key, token, h)
		return driver.RWGrant{}, errGone
	}
	g := driver.RWGrant{Mode: h.mode, Fence: uint64(h.fence), TTL: min(s.certainTTL(h.sid, start), ttl)}
	if h.mode == driver.RWRead {
		g.Readers = rwReaders(l.nodes)
	}
	return g, nil
}
