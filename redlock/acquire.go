package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"example.com/dlock"
	"example.com/dlock/driver"
)

// acquireTally sorts the replies of one acquisition fan-out.
type acquireTally struct {
	granted   []int // node indices
	grants    []driver.Grant
	contended []time.Duration // remaining TTLs (negative: unknown)
	failed    []int           // errors: outcome unknown
	silent    int             // no answer yet: handled by lateCleanup
	errs      []error
	invalid   error
}

func tallyAcquire(rs []reply[driver.Grant]) acquireTally {
	var t acquireTally
	for i, r := range rs {
		var ce *driver.ContendedError
		switch {
		case r.err == nil:
			t.granted = append(t.granted, i)
			t.grants = append(t.grants, r.val)
		case errors.As(r.err, &ce):
			t.contended = append(t.contended, ce.Remaining)
		case errors.Is(r.err, driver.ErrInvalid):
			t.invalid = r.err
		case !r.answered:
			t.silent++
			t.errs = append(t.errs, &NodeError{Node: i, Err: r.err})
		default:
			t.failed = append(t.failed, i)
			t.errs = append(t.errs, &NodeError{Node: i, Err: r.err})
		}
	}
	return t
}

// holds returns the hold count that at least k of the granting nodes reach.
func (t *acquireTally) holds(q int) int {
	hs := make([]int, len(t.grants))
	for i, g := range t.grants {
		hs[i] = g.Holds
	}
	return kthLargest(hs, q)
}

// confirmed counts the granting nodes where the token already held the key
// before this call.
func (t *acquireTally) confirmed() int {
	n := 0
	for _, g := range t.grants {
		if g.Holds > 1 {
			n++
		}
	}
	return n
}

// Acquire implements Mutex: it asks every node in parallel, each within
// the node timeout, and succeeds when a majority granted and validity is
// left (TTL − elapsed − drift > 0, elapsed measured on the monotonic clock
// from the start of the call, including the fence raise).
//
// It stops waiting as soon as the outcome is settled. On failure it releases
// the key on every node that granted or failed with an unknown outcome, in
// parallel; a node that had not answered yet releases its own grant when its
// answer arrives, from the goroutine that ran its call, within the node
// timeout. A node that answered "contended" changed nothing, so when all
// did, no release is sent. It then returns a *driver.ContendedError if
// contention alone ruled out a majority, an error matching ErrNoQuorum (and
// driver.ErrUnavailable) if failed or silent nodes did, or one matching
// driver.ErrNotAcquired and ErrValidityElapsed if the grant came too late.
// Invalid keys return the node's driver.ErrInvalid error.
//
// A first acquisition raises the fence (see the package documentation) and
// is recorded in the Store with the nodes that granted it; a re-entry of a
// holding recorded here returns that holding's recorded fence and records
// its own nodes, so that its Release removes holds only there. The grant's
// Holds is the holding's hold count in this Store: how many Releases free
// it (see the package documentation, Re-entry and release). Its TTL is
// explained on Options and in the package documentation.
func (s *Store) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := dlock.ValidateKey(key); err != nil {
		return driver.Grant{}, err
	}
	if ttl <= 0 {
		return driver.Grant{}, fmt.Errorf("%w: ttl %v", driver.ErrInvalid, ttl)
	}
	start := s.clock.Now()
	q, n := s.quorum, len(s.nodes)
	k := regKey{key, token}
	known := s.reg.known(k, start)
	lc := &lateCleanup{s: s, key: key, token: token, ttl: ttl}
	earlier, finished := s.flights.start(key, token, n, s.all)
	rs := fanout(ctx, s.pool, s.nodeTimeout(ttl), s.all, func(ctx context.Context, i int) (driver.Grant, error) {
		defer finished(i)
		earlier(ctx, i)
		return s.nodes[i].Acquire(ctx, key, token, ttl)
	}, func(rs []reply[driver.Grant]) bool {
		// Stop early once the outcome is settled: success, or contention
		// alone rules a majority out. Nodes still pending then clean up
		// after themselves (lateCleanup).
		ok, contended := 0, 0
		for _, r := range rs {
			var ce *driver.ContendedError
			if r.answered && r.err == nil {
				ok++
			} else if r.answered && errors.As(r.err, &ce) {
				contended++
			}
		}
		return ok >= q || contended > n-q
	}, lc.arrive)
	t := tallyAcquire(rs)
	var g driver.Grant
	var ref levelRef
	var err error
	switch {
	case t.invalid != nil:
		err = t.invalid
	case len(t.granted) < q:
		err = s.acquireError(ctx, &t)
	default:
		g, ref, err = s.settle(ctx, k, ttl, start, &t)
	}
	reentry := known || t.holds(1) > 1
	var unanswered []int
	for i, r := range rs {
		if !r.answered {
			unanswered = append(unanswered, i)
		}
	}
	late := lc.decide(err != nil, reentry, ref, unanswered)
	if err != nil {
		s.cleanup(key, token, ttl, append(s.undoSet(&t, reentry), late...))
		return driver.Grant{}, err
	}
	s.cleanup(key, token, ttl, late) // late grants whose level is gone already
	return g, nil
}

// lateCleanup handles node replies that arrive after an acquisition stopped
// waiting. Before the outcome is decided they are queued for the caller;
// afterwards, if the acquisition failed, the goroutine that ran the node's
// call releases its own grant (or its unknown outcome) itself, bounded by
// the node timeout. If it succeeded, a late grant joins the acquisition's
// level in the registry, so that the level's Release removes it; if that
// level was released already without asking the node, the grant is
// released at once the same way.
//
// The nodes still to answer at the decision get a flight of their own (see
// flights), ended once their reply is handled: a later call by the same
// token on such a node (the Client's next attempt, a re-entry, a Release)
// waits for that handling, so a late release cannot land after that call's
// grant and take its hold instead.
type lateCleanup struct {
	s          *Store
	key, token string
	ttl        time.Duration

	mu              sync.Mutex
	decided, failed bool
	reentry         bool
	level           levelRef
	pending         []pendingReply
	finished        func(node int) // ends a late node's flight; nil if none
}

// pendingReply is a node's answer that arrived before the outcome was decided.
type pendingReply struct {
	node  int
	holds int
	err   error
}

// needsUndo reports whether a node's reply leaves something to release after
// a failed acquisition: a grant, or (outside re-entry) an unknown outcome.
func needsUndo(err error, reentry bool) bool {
	var ce *driver.ContendedError
	switch {
	case err == nil:
		return true
	case errors.As(err, &ce), errors.Is(err, driver.ErrInvalid):
		return false
	}
	return !reentry
}

func (lc *lateCleanup) arrive(node int, g driver.Grant, err error) {
	lc.mu.Lock()
	if !lc.decided {
		lc.pending = append(lc.pending, pendingReply{node, g.Holds, err})
		lc.mu.Unlock()
		return
	}
	failed, reentry, level, finished := lc.failed, lc.reentry, lc.level, lc.finished
	lc.mu.Unlock()
	undo := 0
	switch {
	case failed && needsUndo(err, reentry):
		undo = 1
	case !failed && err == nil:
		undo = lc.s.reg.addLate(level, node, g.Holds)
	}
	if undo > 0 {
		// Not cleanup: its flight would wait for this node's own.
		ctx, cancel := context.WithTimeout(context.Background(), lc.s.nodeTimeout(lc.ttl))
		for ; undo > 0 && lc.s.nodes[node].Release(ctx, lc.key, lc.token) == nil; undo-- {
		}
		cancel()
	}
	if finished != nil {
		finished(node)
	}
}

// decide records the outcome and returns the nodes whose late replies
// arrived before it and left something to undo, for the caller to release:
// after a failure, grants and unknown outcomes (not nodes that answered
// "contended", where nothing changed; and for a re-entry, only grants, see
// undoSet); after a success, grants whose level was released already (the
// others join their level). unanswered is the nodes the fan-out did not
// hear from: those not among the queued replies get a flight.
func (lc *lateCleanup) decide(failed, reentry bool, level levelRef, unanswered []int) []int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.decided, lc.failed, lc.reentry, lc.level = true, failed, reentry, level
	var undo []int
	for _, r := range lc.pending {
		unanswered = slices.DeleteFunc(unanswered, func(i int) bool { return i == r.node })
		switch {
		case !failed:
			// More than one hold to release here would need a Release of
			// the same token that popped levels of this acquisition before
			// it returned; one is released, any other expires with the key.
			if r.err == nil && lc.s.reg.addLate(level, r.node, r.holds) > 0 {
				undo = append(undo, r.node)
			}
		case needsUndo(r.err, reentry):
			undo = append(undo, r.node)
		}
	}
	if len(unanswered) > 0 {
		_, lc.finished = lc.s.flights.start(lc.key, lc.token, len(lc.s.nodes), unanswered)
	}
	return undo
}

// undoSet is the set of nodes to release after a failed acquisition: those
// that granted and those whose outcome is unknown. When the grants show a
// re-entry, the unknown nodes are left alone: releasing them could remove a
// hold of the outer lease where this attempt never arrived; a hold this
// attempt did add there only keeps that node's key until its expiry.
func (s *Store) undoSet(t *acquireTally, reentry bool) []int {
	if reentry {
		return t.granted
	}
	return append(append([]int(nil), t.granted...), t.failed...)
}

// settle turns a majority of grants into one Grant and records it. A
// re-entry that continues a holding recorded here (see registry.continues)
// takes the holding's recorded fence; any other acquisition is a new
// holding, whose fence is raised on the granting nodes (with fencing on).
// Either must leave validity. The loop runs twice at most: a second time
// only if the holding's record ended (its final release) while this
// re-entry was settling, which makes it a new holding.
func (s *Store) settle(ctx context.Context, k regKey, ttl time.Duration, start time.Time, t *acquireTally) (driver.Grant, levelRef, error) {
	for attempt := 0; ; attempt++ {
		reenter := attempt == 0 && s.reg.continues(k, s.clock.Now(), t.confirmed() >= s.quorum)
		var fence uint64
		if !reenter && s.fencing {
			fences := make([]uint64, len(t.grants))
			for i, g := range t.grants {
				fences[i] = g.Fence
			}
			fence = kthLargest(fences, 1)
			if err := s.raise(ctx, k.key, k.token, ttl, fence, t.granted); err != nil {
				return driver.Grant{}, levelRef{}, err
			}
		}
		if elapsed := s.clock.Now().Sub(start); s.validLeft(ttl, elapsed) <= 0 {
			return driver.Grant{}, levelRef{}, fmt.Errorf("%w: %w: took %v of a %v lease", driver.ErrNotAcquired, ErrValidityElapsed, elapsed, ttl)
		}
		if f, holds, ref, ok := s.reg.commit(k, t.granted, t.grants, fence, reenter, s.stampOf(start, ttl)); ok {
			return driver.Grant{Fence: f, Holds: holds, TTL: s.grantTTL(ttl)}, ref, nil
		}
	}
}

// acquireError explains a failed acquisition. Contention wins when it alone
// rules out a majority: the waiter then sleeps until the holder's majority
// could lapse (or a release is announced) instead of backing off.
func (s *Store) acquireError(ctx context.Context, t *acquireTally) error {
	n, q := len(s.nodes), s.quorum
	if c := len(t.contended); c > n-q {
		return &driver.ContendedError{Remaining: contendedRemaining(t.contended, n, q)}
	}
	errs := t.errs
	if len(t.contended) > 0 {
		errs = append(errs, fmt.Errorf("%d nodes held by another owner", len(t.contended)))
	}
	return noQuorum("acquire", len(t.granted), n, q, errs, ctx.Err())
}

// contendedRemaining estimates when a majority can next be free: c of n nodes
// are held by another owner; once k = q−(n−c) of them lapse, q nodes are free.
// That is the k-th smallest remaining TTL: for c = n = 5 the median, for
// c = 4 the second smallest, for c = q the smallest, which is also when the
// holder's own majority lapses. Unknown remaining TTLs give -1 (unknown).
func contendedRemaining(rem []time.Duration, n, q int) time.Duration {
	c := len(rem)
	k := q - (n - c) // contended nodes that must lapse before a majority is free
	for _, r := range rem {
		if r < 0 {
			return -1
		}
	}
	return kthLargest(rem, c-k+1)
}

// cleanup releases key on nodes after a failed acquisition, in parallel,
// detached from the caller's context (which may have ended: that is often
// why the acquisition failed) and bounded by the node timeout. It reports
// nothing: a node it cannot reach drops the key at its expiry.
func (s *Store) cleanup(key, token string, ttl time.Duration, nodes []int) {
	if len(nodes) == 0 {
		return
	}
	earlier, finished := s.flights.start(key, token, len(s.nodes), nodes)
	fanout(context.Background(), s.pool, s.nodeTimeout(ttl), nodes, func(ctx context.Context, i int) (struct{}, error) {
		defer finished(i)
		earlier(ctx, i)
		return struct{}{}, s.nodes[i].Release(ctx, key, token)
	}, nil, nil)
}
