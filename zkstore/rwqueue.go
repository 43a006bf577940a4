package zkstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"example.com/dlock/driver"
)

// AcquireReadQueued waits in the lock's queue for a read holding of key,
// as a Curator reader does: it creates our reader's node and, while a
// writer's node is before ours, watches the nearest such node (only that
// node: a release of a reader, or of a writer further ahead, wakes no one
// behind it) and lists again once it is gone. When no writer's node is
// before ours it grants the holding as AcquireRead does (the grant's
// setData, which also fails if our session ended). A token that already
// holds key through this store is handled as by AcquireRead (a re-entry,
// or a downgrade). On any error (ctx ended, the session expired: an error
// matching driver.ErrNotAcquired) our node is deleted (or recorded for
// deletion by the next call on the lock) and the token holds nothing.
func (s *Store) AcquireReadQueued(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	return s.rwQueued(ctx, key, token, ttl, driver.RWRead)
}

// AcquireWriteQueued waits in the lock's queue for the write holding of
// key, as a Curator writer does: it creates our writer's node (or takes
// over the token's queued node left by a refused AcquireWrite, keeping its
// place) and, while a node is before ours, watches the one just before it
// (FIFO, no herd), listing again once it is gone. A reader of key gets
// driver.ErrUpgrade at once; the writer a re-entry. Errors are as for
// AcquireReadQueued.
func (s *Store) AcquireWriteQueued(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	return s.rwQueued(ctx, key, token, ttl, driver.RWWrite)
}

func (s *Store) rwQueued(ctx context.Context, key, token string, ttl time.Duration, mode driver.RWMode) (driver.RWGrant, error) {
	if err := s.checkRW(key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	start := time.Now()
	lp := s.rwPath(key)
	h, ok := s.rwLookup(key, token)
	switch {
	case ok && h.granted:
		if mode == driver.RWRead {
			return s.AcquireRead(ctx, key, token, ttl)
		}
		return s.AcquireWrite(ctx, key, token, ttl)
	case ok && mode == driver.RWRead:
		return driver.RWGrant{}, fmt.Errorf("%w: zkstore: the token is queued as a writer of %q: it would wait behind itself", driver.ErrInvalid, key)
	case ok && h.timer.Stop():
		s.rwForget(key, token, h) // ours again: waited for below
	default:
		ok = false
	}
	var l rwList
	var err error
	if ok {
		l, err = s.rwChildren(ctx, key, lp)
	} else {
		h, l, err = s.rwEnqueue(ctx, key, token, lp, mode)
		if err != nil {
			return driver.RWGrant{}, err
		}
	}
	for err == nil {
		i := slices.Index(l.nodes, h.name)
		if i < 0 {
			err = fmt.Errorf("%w: zkstore: our node for %q is gone while waiting: the session expired", driver.ErrNotAcquired, key)
			break
		}
		if rwHolds(l.nodes, i) {
			readers := 0
			if mode == driver.RWRead {
				readers = rwReaders(l.nodes)
			}
			return s.rwGrant(ctx, key, token, h, readers, ttl, start)
		}
		awaited := lp + "/" + rwAwaited(l.nodes, i)
		if s.rwHerd {
			awaited = lp // the tests' control: every change of the queue wakes every waiter
		}
		if err = s.awaitGone(ctx, key, awaited); err == nil {
			l, err = s.rwChildren(ctx, key, lp)
		}
	}
	s.withdraw(ctx, lp, created{name: h.name, path: h.path})
	return driver.RWGrant{}, err
}

// rwAwaited is the node the waiter at index i of nodes watches: a writer
// the node just before it, a reader the nearest writer's node before it.
func rwAwaited(nodes []string, i int) string {
	if rwIsWrite(nodes[i]) {
		return nodes[i-1]
	}
	for j := i - 1; j >= 0; j-- {
		if rwIsWrite(nodes[j]) {
			return nodes[j]
		}
	}
	return nodes[i-1] // not reached: a reader with no writer before it holds
}
