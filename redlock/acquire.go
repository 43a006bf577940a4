package redlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

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

// Acquire implements driver.Mutex: it asks every node in parallel, each within
// the node timeout, and succeeds when a majority granted and validity is
// left (TTL − elapsed − drift > 0, elapsed measured on the monotonic clock
// from the start of the call, including the fence raise).
//
// It stops waiting as soon as the outcome is settled (for contention, once
// the Remaining it reports no longer depends on the nodes yet to answer).
// On failure it releases
// the key on every node that granted or failed with an unknown outcome, in
// parallel; a node that had not answered yet releases its own grant when its
// answer arrives, from the goroutine that ran its call, within the node
// timeout. An unknown outcome is undone only on nodes that can tell this
// acquisition's hold from a later one of the same token (CallUndoer, as
// RedisNode): elsewhere, once Acquire has returned, it is left to expire
// with the key, since a Release could take the hold of the token's next
// acquisition through another Store. A node that answered "contended" changed nothing, so when all
// did, no release is sent. It then returns a *driver.ContendedError if
// contention alone ruled out a majority, an error matching ErrNoQuorum (and
// driver.ErrUnavailable) if failed or silent nodes did, or one matching
// driver.ErrNotAcquired and ErrValidityElapsed if the grant came too late.
// Invalid keys return the node's driver.ErrInvalid error. If ctx is
// already done, Acquire asks no node and returns ctx's error.
//
// A first acquisition raises the fence (see the package documentation) and
// is recorded in the Store with the nodes that granted it; a re-entry of a
// holding recorded here returns that holding's recorded fence and records
// its own nodes, so that its Release removes holds only there. The grant's
// Holds is the holding's hold count in this Store: how many Releases free
// it (see the package documentation, Re-entry and release). Its TTL is
// explained on Options and in the package documentation.
func (s *Store) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := driver.ValidateKey(key); err != nil {
		return driver.Grant{}, err
	}
	if ttl <= 0 {
		return driver.Grant{}, fmt.Errorf("%w: ttl %v", driver.ErrInvalid, ttl)
	}
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	start := s.clock.Now()
	q, n := s.quorum, len(s.nodes)
	k := regKey{key, token}
	known := s.reg.known(k, start)
	call := s.newCall()
	lc := &lateCleanup{s: s, key: key, token: token, call: call, ttl: ttl}
	earlier, finished := s.flights.start(key, token, n, s.all)
	rs := fanout(ctx, s.pool, s.nodeTimeout(ttl), s.all, func(ctx context.Context, i int) (driver.Grant, error) {
		defer finished(i)
		earlier(ctx, i)
		return s.acquireOn(ctx, i, key, token, ttl, call)
	}, func(rs []reply[driver.Grant]) bool { return acquireSettled(rs, n, q) }, lc.arrive)
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
	late, lateGrants := lc.decide(err != nil, reentry, ref, unanswered)
	if err != nil {
		s.cleanup(key, token, call, ttl, append(s.undoSet(&t, reentry), late...), setOf(t.granted)|lateGrants)
		return driver.Grant{}, err
	}
	s.cleanup(key, token, call, ttl, late, lateGrants) // late grants whose level is gone already
	return g, nil
}

// acquireSettled reports whether an acquisition's fan-out can stop before
// every node answered: a majority granted, or contention alone rules a
// majority out and the Remaining it reports (see contendedRemaining) is
// the same whatever the nodes yet to answer say. Stopping at the first
// contended majority would let the fastest nodes set Remaining: a node
// that has not yet applied the holder's latest Extend (which returned once
// a majority had) would report the expiry before it. Nodes still pending
// when it stops clean up after themselves (lateCleanup).
func acquireSettled(rs []reply[driver.Grant], n, q int) bool {
	ok, pending := 0, 0
	var rem []time.Duration
	for _, r := range rs {
		var ce *driver.ContendedError
		switch {
		case !r.answered:
			pending++
		case r.err == nil:
			ok++
		case errors.As(r.err, &ce):
			rem = append(rem, ce.Remaining)
		}
	}
	if ok >= q {
		return true
	}
	if len(rem) <= n-q {
		return false
	}
	if pending == 0 || contendedRemaining(rem, n, q) < 0 {
		return true
	}
	// The pending nodes could all be free (the estimate so far) or all
	// held for longer than any answer: settled if both give the same.
	held := append(slices.Clone(rem), slices.Repeat([]time.Duration{math.MaxInt64}, pending)...)
	return contendedRemaining(held, n, q) == contendedRemaining(rem, n, q)
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
	s                *Store
	key, token, call string // call: the acquisition's call id (see CallUndoer)
	ttl              time.Duration

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
	// Not cleanup: its flight would wait for this node's own.
	switch {
	case failed && needsUndo(err, reentry):
		// The acquisition has returned: an unknown outcome is undone only
		// where the node can tell this acquisition's hold from a later
		// one's (see undoOn).
		ctx, cancel := context.WithTimeout(context.Background(), lc.s.nodeTimeout(lc.ttl))
		_ = lc.s.undoOn(ctx, node, lc.key, lc.token, lc.call, err == nil, true)
		cancel()
	case !failed && err == nil:
		if undo := lc.s.reg.addLate(level, node, g.Holds); undo > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), lc.s.nodeTimeout(lc.ttl))
			for ; undo > 0 && lc.s.nodes[node].Release(ctx, lc.key, lc.token) == nil; undo-- {
			}
			cancel()
		}
	}
	if finished != nil {
		finished(node)
	}
}

// decide records the outcome and returns the nodes whose late replies
// arrived before it and left something to undo, for the caller to release,
// and which of them granted: after a failure, grants and unknown outcomes
// (not nodes that answered "contended", where nothing changed; and for a
// re-entry, only grants, see undoSet); after a success, grants whose level
// was released already (the others join their level). unanswered is the
// nodes the fan-out did not hear from: those not among the queued replies
// get a flight.
func (lc *lateCleanup) decide(failed, reentry bool, level levelRef, unanswered []int) (undo []int, grants nodeSet) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.decided, lc.failed, lc.reentry, lc.level = true, failed, reentry, level
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
		if r.err == nil {
			grants |= 1 << uint(r.node)
		}
	}
	if len(unanswered) > 0 {
		_, lc.finished = lc.s.flights.start(lc.key, lc.token, len(lc.s.nodes), unanswered)
	}
	return undo, grants
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
			if !s.lateRaise {
				if err := s.raise(ctx, k.key, k.token, ttl, fence, t.granted); err != nil {
					return driver.Grant{}, levelRef{}, err
				}
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

// cleanup undoes an acquisition (call, see CallUndoer) on nodes, in
// parallel, detached from the caller's context (which may have ended: that
// is often why the acquisition failed) and bounded by the node timeout:
// those in granted are released, the others (unknown outcomes) undone as
// undoOn says. It reports nothing: a node it cannot reach drops the key at
// its expiry.
func (s *Store) cleanup(key, token, call string, ttl time.Duration, nodes []int, granted nodeSet) {
	if len(nodes) == 0 {
		return
	}
	earlier, finished := s.flights.start(key, token, len(s.nodes), nodes)
	fanout(context.Background(), s.pool, s.nodeTimeout(ttl), nodes, func(ctx context.Context, i int) (struct{}, error) {
		defer finished(i)
		earlier(ctx, i)
		return struct{}{}, s.undoOn(ctx, i, key, token, call, granted.has(i), false)
	}, nil, nil)
}
