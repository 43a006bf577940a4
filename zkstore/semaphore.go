package zkstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"example.com/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// The semaphore (driver.Semaphore) in Curator's InterProcessSemaphoreV2
// layout: an acquisition takes the semaphore's mutex (P/locks), counts the
// lease nodes (P/leases), and if k more fit under the limit creates k
// EPHEMERAL_SEQUENTIAL lease nodes of the store's session in one multi,
// which also writes the limit on the leases directory; then it releases
// the mutex. Curator's acquirers count and create under the same mutex,
// one lease node per permit, so the two share the permits. Holdings last
// as long as the session; ttl is ignored.

// semHolding is a token's lease nodes of a semaphore key in this store.
type semHolding struct {
	paths []string
	sid   int64
	n, k  int
	fence int64
}

func (s *Store) semLookup(key, token string) (*semHolding, bool) {
	sid := s.conn.SessionID()
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.sem[rwKey{key, token}]
	if ok && h.sid != sid {
		delete(s.sem, rwKey{key, token})
		return nil, false
	}
	return h, ok
}

func (s *Store) semSet(key, token string, h *semHolding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h == nil {
		delete(s.sem, rwKey{key, token})
	} else if !s.closed {
		s.sem[rwKey{key, token}] = h
	}
}

// AcquirePermits implements driver.Semaphore. It takes the semaphore's
// mutex (create, list; see semLock for when another holds it: refused if
// the permits are not free, as when a Curator acquirer waits for a lease
// holding the mutex, else a short wait), reads the leases and the stored limit
// (LimitMismatchError if another is stored while permits are out), and
// creates k lease nodes, stores n and deletes its mutex node in one multi,
// whose zxid is the fence: 4 round trips when free (5 requests: the
// leases' list and data go together). A re-entry
// by the holding token through this store is a sync and a listing. The
// PermitsTakenError's Remaining is -1: leases last as long as their
// session.
func (s *Store) AcquirePermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) (driver.PermitGrant, error) {
	if err := driver.ValidatePermits(key, n, k, ttl); err != nil {
		return driver.PermitGrant{}, err
	}
	if err := s.checkSemKey(key); err != nil {
		return driver.PermitGrant{}, err
	}
	start := time.Now()
	sp := s.semPath(key)
	if h, ok := s.semLookup(key, token); ok {
		switch {
		case h.k != k:
			return driver.PermitGrant{}, fmt.Errorf("%w: zkstore: the token holds %d permits of %q, asked %d", driver.ErrInvalid, h.k, key, k)
		case h.n != n:
			return driver.PermitGrant{}, &driver.LimitMismatchError{Stored: h.n, Asked: n}
		}
		g, err := s.semConfirm(ctx, key, token, sp, h, ttl, start)
		if !errors.Is(err, errGone) {
			return g, err
		}
	}
	lock, err := s.semLock(ctx, key, token, sp, n, k)
	if err != nil {
		return driver.PermitGrant{}, err
	}
	held := true // our mutex node, until the multi deletes it
	defer func() {
		if held {
			s.withdraw(ctx, sp+"/"+semLocks, lock)
		}
	}()
	leases, limit, err := s.semLeases(ctx, key, sp)
	switch {
	case err != nil:
		return driver.PermitGrant{}, err
	case len(leases) > 0 && limit > 0 && limit != n:
		return driver.PermitGrant{}, &driver.LimitMismatchError{Stored: limit, Asked: n}
	case len(leases)+k > n:
		return driver.PermitGrant{}, &driver.PermitsTakenError{Used: len(leases), Limit: n, Remaining: -1}
	}
	h, err := s.semCreate(ctx, key, token, sp, lock.path, n, k)
	if err != nil {
		return driver.PermitGrant{}, err
	}
	held = false
	s.semSet(key, token, h)
	return driver.PermitGrant{Fence: uint64(h.fence), Permits: k, Used: len(leases) + k, TTL: min(s.certainTTL(h.sid, start), ttl)}, nil
}

// semLockWait bounds the wait for the semaphore's mutex while the permits
// asked for are free (its holder is another acquirer, a few round trips
// from leaving it).
const semLockWait = 5 * time.Second

// semLock takes the semaphore's mutex: our lock node, first in the queue.
// While another node is before ours it reads the leases: if k more do not
// fit under the limit (a Curator acquirer waiting for room holds the mutex
// meanwhile) it deletes our node and returns a *driver.PermitsTakenError;
// otherwise it waits for the node before ours to go (watching it only),
// for at most semLockWait.
func (s *Store) semLock(ctx context.Context, key, token, sp string, n, k int) (created, error) {
	lp := sp + "/" + semLocks
	c, err := s.create(ctx, key, lp, nodeData(1, digest(token), "", ""))
	if err != nil {
		return created{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, semLockWait)
	defer cancel()
	nodes, _, err := s.childrenZ(wctx, key, lp)
	taken := &driver.PermitsTakenError{Limit: n, Remaining: -1}
	for err == nil {
		var pred string
		if pred, err = s.predecessor(key, lp, c, nodes); err != nil || pred == "" {
			break
		}
		var leases []string
		if leases, taken.Limit, err = s.semLeases(wctx, key, sp); taken.Limit == 0 {
			taken.Limit = n
		}
		if taken.Used = len(leases); err == nil && taken.Used+k > taken.Limit {
			err = taken
		}
		if err == nil {
			if err = s.awaitGone(wctx, key, lp+"/"+pred); err == nil {
				nodes, _, err = s.childrenZ(wctx, key, lp)
			}
		}
	}
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		err = taken // the mutex stayed taken for semLockWait
	}
	if err != nil {
		s.withdraw(ctx, lp, c)
		return created{}, err
	}
	return c, nil
}

// semLeases lists the lease nodes of sp (without this store's orphans) and
// reads the stored limit, both requests at once.
func (s *Store) semLeases(ctx context.Context, key, sp string) ([]string, int, error) {
	lp := sp + "/" + semLeases
	var data []byte
	var derr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		derr = s.read(ctx, func() error {
			var e error
			data, _, e = s.conn.Get(lp)
			return e
		})
	}()
	var kids []string
	err := s.read(ctx, func() error {
		var e error
		kids, _, e = s.conn.Children(lp)
		return e
	})
	<-done
	if errors.Is(err, zk.ErrNoNode) {
		return nil, 0, nil
	}
	if err == nil && !errors.Is(derr, zk.ErrNoNode) {
		err = derr
	}
	if err != nil {
		return nil, 0, wrapErr("list the leases of", key, err)
	}
	leases := slices.DeleteFunc(s.sweep(ctx, lp, kids), func(c string) bool { return !isLeaseNode(c) })
	if s.semOwnOnly {
		leases = s.dlockLeases(ctx, lp, leases)
	}
	return leases, parseLimit(data), nil
}

// semCreate creates the token's k lease nodes, stores n as the limit and
// deletes our mutex node lock, in one multi (all or nothing: to Curator's
// acquirers the mutex is left at the instant the leases appear), creating
// the directories first if they are missing. The fence is the multi's zxid
// (the directory's new mzxid). If it fails, the mutex node is still ours;
// if the reply is lost the nodes' UUID is recorded as an orphan.
func (s *Store) semCreate(ctx context.Context, key, token, sp, lock string, n, k int) (*semHolding, error) {
	lp := sp + "/" + semLeases
	for range createAttempts {
		uuid := newUUID()
		ops := make([]any, 0, k+1)
		for range k {
			ops = append(ops, &zk.CreateRequest{Path: lp + "/" + leaseName(uuid), Data: semData(k, digest(token)), Acl: s.acl, Flags: zk.FlagEphemeralSequential})
		}
		ops = append(ops, &zk.SetDataRequest{Path: lp, Data: []byte(semLimitPrefix + fmt.Sprint(n)), Version: -1},
			&zk.DeleteRequest{Path: lock, Version: -1})
		var res []zk.MultiResponse
		var sid int64
		err := s.write(ctx, func() error {
			before := s.conn.SessionID()
			var e error
			res, e = s.conn.Multi(ops...)
			if e == nil && s.conn.SessionID() == before {
				sid = before
			}
			return e
		})
		switch {
		case err == nil && sid != 0:
			h := &semHolding{sid: sid, n: n, k: k, fence: res[k].Stat.Mzxid}
			for _, r := range res[:k] {
				h.paths = append(h.paths, r.String)
			}
			return h, nil
		case err == nil:
			for _, r := range res[:k] {
				_ = s.deleteNode(ctx, r.String, -1) // the session changed around it: undo
			}
			return nil, wrapErr("create leases for", key, errors.New("the session changed during the create"))
		case errors.Is(err, zk.ErrNoNode) && len(res) == len(ops) && errors.Is(res[k+1].Error, zk.ErrNoNode):
			return nil, fmt.Errorf("%w: zkstore: our node of the semaphore's mutex for %q is gone: the session expired", driver.ErrNotAcquired, key)
		case errors.Is(err, zk.ErrNoNode):
			if err := s.createParents(ctx, key, lp); err != nil {
				return nil, err
			}
		default:
			if !replied(err) {
				s.addOrphan(lp, uuid)
			}
			return nil, wrapErr("create leases for", key, err)
		}
	}
	return nil, wrapErr("create leases for", key, errors.New("the leases directory kept vanishing"))
}

// semConfirm is a re-entry or an extension: a sync (which confirms the
// session) and a listing of the leases; errGone if one of ours is missing.
func (s *Store) semConfirm(ctx context.Context, key, token, sp string, h *semHolding, ttl time.Duration, start time.Time) (driver.PermitGrant, error) {
	if err := s.sync(ctx, sp); err != nil {
		return driver.PermitGrant{}, wrapErr("sync", key, err)
	}
	leases, _, err := s.semLeases(ctx, key, sp)
	if err != nil {
		return driver.PermitGrant{}, err
	}
	for _, p := range h.paths {
		if !slices.Contains(leases, p[strings.LastIndexByte(p, '/')+1:]) {
			s.semSet(key, token, nil)
			return driver.PermitGrant{}, errGone
		}
	}
	return driver.PermitGrant{Fence: uint64(h.fence), Permits: h.k, Used: len(leases), TTL: min(s.certainTTL(h.sid, start), ttl)}, nil
}

// dlockLeases keeps the leases with dlock's data: the tests' control that
// ignores Curator's leases (SetSemOwnOnly).
func (s *Store) dlockLeases(ctx context.Context, lp string, leases []string) []string {
	return slices.DeleteFunc(leases, func(n string) bool {
		var data []byte
		_ = s.read(ctx, func() error {
			var e error
			data, _, e = s.conn.Get(lp + "/" + n)
			return e
		})
		_, _, ok := parseSemData(data)
		return !ok
	})
}
