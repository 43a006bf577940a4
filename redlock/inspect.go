package redlock

import (
	"context"
	"time"

	"example.com/dlock/driver"
)

var _ driver.Inspector = (*Store)(nil)

// Inspect implements driver.Inspector with the majority's view of key: it is
// held by a token only if that token holds it on a quorum of nodes, with the
// hold count and remaining time that a quorum agrees on (the quorum-th
// largest) and the holding's fence (exactly, for a holding this Store
// granted; through another Store possibly a later one, see view);
// a free key has the fence a quorum of the answering nodes reach, which is
// the last holding's when every node answers. It changes nothing.
//
// It returns an error matching ErrNoQuorum if fewer than a quorum of nodes
// answered, and one matching errors.ErrUnsupported if a node store cannot
// inspect (found through wrappers with driver.As): the store declares the
// capability, but cannot serve it over such nodes.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	inspectors, err := nodeCaps[driver.Inspector](s, "inspect locks")
	if err != nil {
		return driver.Info{}, err
	}
	rs := fanout(ctx, s.pool, s.timeout, s.all, func(ctx context.Context, i int) (driver.Info, error) {
		return inspectors[i].Inspect(ctx, key)
	}, func([]reply[driver.Info]) bool { return false }, nil)
	var answered []driver.Info
	var errs []error
	for i, r := range rs {
		if r.answered && r.err == nil {
			answered = append(answered, r.val)
		} else {
			errs = append(errs, &NodeError{Node: i, Err: r.err})
		}
	}
	if len(answered) < s.quorum {
		return driver.Info{}, noQuorum("inspect", len(answered), len(s.nodes), s.quorum, errs, ctx.Err())
	}
	return s.view(key, answered), nil
}

// view is majorityView with, over FencedReleaser nodes, a held key's fence
// as the holding got it: its nodes keep their own fences until the release
// carries the holding's to them (see raise), so the Store's record of the
// holding says it, or, for a holding granted through another Store, the
// largest fence of the nodes where its token holds the key (the holding's
// own, unless a node that granted after the holding was settled has a
// larger one).
func (s *Store) view(key string, infos []driver.Info) driver.Info {
	out := majorityView(infos, s.quorum)
	if !out.Held || !s.lateRaise {
		return out
	}
	if f, ok := s.reg.fenceOf(regKey{key, out.Token}, s.clock.Now()); ok {
		out.Fence = f
		return out
	}
	out.Fence = 0
	for _, in := range infos {
		if in.Held && in.Token == out.Token {
			out.Fence = max(out.Fence, in.Fence)
		}
	}
	return out
}

// majorityView merges the nodes' answers: a holder must hold the key on at
// least q of them. A held key's fence is the q-th largest of the holding
// nodes' fences: the holding's own fence, which the fence raise recorded on
// at least q of them (a node that granted late and was not raised keeps a
// fence of its own, larger or smaller, and at most q-1 such nodes cannot
// move the q-th largest). A free key's fence is the q-th largest of all
// the fences reported, for the same reason: the last holding's fence was
// raised on q nodes and kept in their tombstones, while fences no caller
// was ever given (a late grant's, a failed acquisition's) are on fewer.
// With fewer answers than nodes it can be lower than the last holding's;
// 0 if fewer than q nodes report one.
func majorityView(infos []driver.Info, q int) driver.Info {
	var out driver.Info
	count := map[string]int{}
	all := make([]uint64, len(infos))
	for i, in := range infos {
		all[i] = in.Fence
		if in.Held {
			count[in.Token]++
		}
	}
	out.Fence = kthLargest(all, q)
	for token, n := range count {
		if n < q {
			continue
		}
		var holds []int
		var remaining []time.Duration
		var fences []uint64
		for _, in := range infos {
			if in.Held && in.Token == token {
				holds = append(holds, in.Holds)
				remaining = append(remaining, in.Remaining)
				fences = append(fences, in.Fence)
			}
		}
		out.Held, out.Token = true, token
		out.Holds, out.Remaining, out.Fence = kthLargest(holds, q), kthLargest(remaining, q), kthLargest(fences, q)
	}
	return out
}
