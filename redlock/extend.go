package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
)

// verdict sorts the per-node outcomes of one Extend or Release.
type verdict struct {
	ok            int
	expired, lost int // not held: no holder / another holder
	invalid       error
	grants        []driver.Grant
	errs          []error
}

func (v *verdict) add(node int, g driver.Grant, err error) {
	switch {
	case err == nil:
		v.ok++
		v.grants = append(v.grants, g)
	case errors.Is(err, driver.ErrInvalid):
		v.invalid = err
	case errors.Is(err, driver.ErrNotHeld) && errors.Is(err, driver.ErrTaken):
		v.lost++
	case errors.Is(err, driver.ErrNotHeld):
		v.expired++
	default:
		v.errs = append(v.errs, &NodeError{Node: node, Err: err})
	}
}

// decided reports whether the outcome and its kind can no longer change:
// success, invalid input, or not held with a cause (see notHeld) that the
// nodes yet to answer cannot flip. Deciding "not held" on the first answers
// alone would let the fastest nodes pick the cause: with the next holder on
// three nodes of five and two nodes free, the two free ones answering first
// would make a taken lock look expired. Other failures wait for every
// node's answer.
func (v *verdict) decided(n, q int) bool {
	if v.ok >= q || v.invalid != nil {
		return true
	}
	if v.expired+v.lost <= n-q {
		return false
	}
	pending := n - v.ok - v.expired - v.lost - len(v.errs)
	return v.lost > v.expired+pending || v.lost+pending <= v.expired
}

// notHeld is the error once a majority is out of reach because nodes said
// the token does not hold the key: ErrTaken if more of those nodes have
// another holder than have none, ErrExpired otherwise.
func (v *verdict) notHeld(n, q int) error {
	if v.expired+v.lost <= n-q {
		return nil
	}
	// The cause is what most of the nodes that do not hold it say: a few
	// nodes held by another token (say, a failed competitor's grant not yet
	// cleaned up) do not make the lock taken.
	cause := driver.ErrExpired
	if v.lost > v.expired {
		cause = driver.ErrTaken
	}
	return fmt.Errorf("%w: %w: redlock: %d of %d nodes no longer hold it", driver.ErrNotHeld, cause, v.expired+v.lost, n)
}

// Extend implements driver.Mutex: it resets the expiry on every node in
// parallel and succeeds if a majority did within the validity window
// (TTL − elapsed − drift > 0). The grant reports the holding's recorded
// fence and hold count if this Store granted the holding, otherwise the
// ones a majority of nodes agrees on (the quorum-th largest). If so many
// nodes answered that the token does not hold the key that no majority is
// possible, it returns an error matching driver.ErrNotHeld (and ErrExpired or
// ErrTaken) and dlock's lease is lost at once. If nodes did not answer, it
// returns an error matching ErrNoQuorum: the lease keeps its current
// validity and dlock retries the renewal until that runs out, when the lost
// signal fires; the nodes' keys outlive that moment by at least the drift
// allowance. Extend never re-creates a key. If ctx is already done it asks
// no node and returns ctx's error.
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	rs := s.ExtendBatch(ctx, []driver.ExtendRequest{{Key: key, Token: token, TTL: ttl}})
	return rs[0].Grant, rs[0].Err
}

// ExtendBatch implements driver.BatchExtender: every node gets the whole batch
// at once (one pipeline per node when the node is itself a BatchExtender),
// all nodes in parallel, so a renewal round costs one fan-out however many
// leases it renews. Each request then succeeds or fails as Extend describes.
// If ctx is already done, no node is asked: each valid request fails with
// ctx's error.
func (s *Store) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	out := make([]driver.ExtendResult, len(reqs))
	if len(reqs) == 0 {
		return out
	}
	minTTL := reqs[0].TTL
	for i, r := range reqs {
		if err := driver.ValidateKey(r.Key); err != nil {
			out[i].Err = err
		} else if r.TTL <= 0 {
			out[i].Err = fmt.Errorf("%w: ttl %v", driver.ErrInvalid, r.TTL)
		}
		minTTL = min(minTTL, r.TTL)
	}
	if err := ctx.Err(); err != nil {
		for i := range out {
			if out[i].Err == nil {
				out[i].Err = err
			}
		}
		return out
	}
	n, q := len(s.nodes), s.quorum
	start := s.clock.Now()
	rs := fanout(ctx, s.pool, s.nodeTimeout(minTTL), s.all, func(ctx context.Context, i int) ([]driver.ExtendResult, error) {
		return extendOn(ctx, s.nodes[i], reqs), nil
	}, func(rs []reply[[]driver.ExtendResult]) bool {
		return allDecided(rs, len(reqs), n, q)
	}, nil)
	elapsed := s.clock.Now().Sub(start)
	for i, r := range reqs {
		if out[i].Err != nil {
			continue
		}
		v := tallyRequest(rs, i)
		out[i] = s.extendResult(ctx, r, &v, elapsed)
	}
	s.recordExtended(reqs, out, start)
	return out
}

// recordExtended moves the registry's timing of each extended holding it
// knows and reports that holding's recorded fence and hold count, under one
// lock for the batch.
func (s *Store) recordExtended(reqs []driver.ExtendRequest, out []driver.ExtendResult, start time.Time) {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	for i, r := range reqs {
		if out[i].Err != nil {
			continue
		}
		if fence, holds, ok := s.reg.extended(regKey{r.Key, r.Token}, s.stampOf(start, r.TTL)); ok {
			out[i].Grant.Fence, out[i].Grant.Holds = fence, holds
		}
	}
}

func (s *Store) extendResult(ctx context.Context, r driver.ExtendRequest, v *verdict, elapsed time.Duration) driver.ExtendResult {
	n, q := len(s.nodes), s.quorum
	switch {
	case v.invalid != nil:
		return driver.ExtendResult{Err: v.invalid}
	case v.ok >= q && s.validLeft(r.TTL, elapsed) > 0:
		fences, holds := make([]uint64, len(v.grants)), make([]int, len(v.grants))
		for j, g := range v.grants {
			fences[j], holds[j] = g.Fence, g.Holds
		}
		g := driver.Grant{Holds: kthLargest(holds, q), TTL: s.grantTTL(r.TTL)}
		switch {
		case s.lateRaise: // the nodes keep their own fences until the release (see raise)
			g.Fence = kthLargest(fences, 1)
		case s.fencing:
			g.Fence = kthLargest(fences, q)
		}
		return driver.ExtendResult{Grant: g}
	case v.ok >= q:
		return driver.ExtendResult{Err: fmt.Errorf("%w: redlock: extend took %v of a %v lease", ErrNoQuorum, elapsed, r.TTL)}
	}
	if err := v.notHeld(n, q); err != nil {
		return driver.ExtendResult{Err: err}
	}
	return driver.ExtendResult{Err: noQuorum("extend", v.ok, n, q, v.errs, ctx.Err())}
}

// extendOn runs a batch on one node: one pipeline if the node batches.
func extendOn(ctx context.Context, node driver.Mutex, reqs []driver.ExtendRequest) []driver.ExtendResult {
	if b, ok := node.(driver.BatchExtender); ok && len(reqs) > 1 {
		return b.ExtendBatch(ctx, reqs)
	}
	out := make([]driver.ExtendResult, len(reqs))
	for i, r := range reqs {
		out[i].Grant, out[i].Err = node.Extend(ctx, r.Key, r.Token, r.TTL)
	}
	return out
}

// tallyRequest collects request i's outcome over all nodes.
func tallyRequest(rs []reply[[]driver.ExtendResult], i int) verdict {
	var v verdict
	for node, r := range rs {
		if !r.answered {
			v.add(node, driver.Grant{}, r.err)
			continue
		}
		v.add(node, r.val[i].Grant, r.val[i].Err)
	}
	return v
}

func allDecided(rs []reply[[]driver.ExtendResult], nreq, n, q int) bool {
	for i := 0; i < nreq; i++ {
		var v verdict
		for node, r := range rs {
			if r.answered {
				v.add(node, r.val[i].Grant, r.val[i].Err)
			}
		}
		if !v.decided(n, q) {
			return false
		}
	}
	return true
}

// Release implements driver.Mutex: it releases one hold, in parallel, on the
// nodes where that hold was added. For a holding this Store granted that is
// the nodes of its latest acquisition not yet released (the in-time and
// late grants of a re-entry, say), so that releasing a re-entry never takes
// a hold of the outer acquisition on a node the re-entry did not reach; the
// holding's last Release asks every node (a hold the Store could not place,
// such as an unknown outcome that was applied, is this holding's too). For
// a holding it does not know (granted through another Store, or recorded
// here so long ago that the record was dropped, see the package
// documentation) it asks every node, as one release of the whole key.
//
// It returns nil once the quorum, N/2+1 of the Store's N nodes, released
// among the asked nodes (all asked nodes, if fewer were asked); an error matching driver.ErrNotHeld (and ErrExpired or ErrTaken) if
// enough asked nodes said the token did not hold the key that this is out of
// reach; otherwise an error matching ErrNoQuorum. The hold is removed from
// the Store's record either way: nodes that were not reached drop it at the
// key's expiry. If ctx is already done it changes nothing, asks no node and
// returns ctx's error.
//
// With fencing over FencedReleaser nodes the release carries the holding's
// fence, which every node that it frees keeps as its last fence (see the
// package documentation). For a holding the Store does not know it first
// asks every node for its view (one more round trip) and carries the
// largest fence of the nodes where the token holds the key.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := driver.ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	nodes := s.all
	set, fence, final, known := s.reg.popFence(regKey{key, token}, s.clock.Now())
	if known && !final {
		nodes = set.list()
	}
	if !known && s.lateRaise {
		fence = s.heldFence(ctx, key, token)
	}
	n, q := len(nodes), min(s.quorum, len(nodes))
	earlier, finished := s.flights.start(key, token, len(s.nodes), nodes)
	rs := fanout(ctx, s.pool, s.timeout, nodes, func(ctx context.Context, i int) (struct{}, error) {
		defer finished(i)
		earlier(ctx, i)
		if s.lateRaise && fence > 0 {
			return struct{}{}, s.nodes[i].(FencedReleaser).ReleaseFence(ctx, key, token, fence)
		}
		return struct{}{}, s.nodes[i].Release(ctx, key, token)
	}, func(rs []reply[struct{}]) bool {
		var v verdict
		for pos, r := range rs {
			if r.answered {
				v.add(nodes[pos], driver.Grant{}, r.err)
			}
		}
		return v.decided(n, q)
	}, nil)
	var v verdict
	for pos, r := range rs {
		v.add(nodes[pos], driver.Grant{}, r.err)
	}
	switch {
	case v.invalid != nil:
		return v.invalid
	case v.ok >= q:
		return nil
	}
	if err := v.notHeld(n, q); err != nil {
		return err
	}
	return noQuorum("release", v.ok, n, q, v.errs, ctx.Err())
}

// heldFence returns the largest fence among the nodes where token holds key,
// 0 if no node says so or the nodes cannot inspect: the fence of a holding
// this Store has no record of, for its release to carry (see Release).
func (s *Store) heldFence(ctx context.Context, key, token string) uint64 {
	inspectors, err := nodeCaps[driver.Inspector](s, "inspect locks")
	if err != nil {
		return 0
	}
	rs := fanout(ctx, s.pool, s.timeout, s.all, func(ctx context.Context, i int) (driver.Info, error) {
		return inspectors[i].Inspect(ctx, key)
	}, nil, nil)
	var f uint64
	for _, r := range rs {
		if r.answered && r.err == nil && r.val.Held && r.val.Token == token {
			f = max(f, r.val.Fence)
		}
	}
	return f
}
