package redlock

import (
	"context"
	"fmt"
	"time"

	"example.com/dlock/driver"
)

var _ driver.Inspector = (*Store)(nil)

// Inspect implements driver.Inspector with the majority's view of key: it is
// held by a token only if that token holds it on a quorum of nodes, with the
// hold count and remaining time that a quorum agrees on (the quorum-th
// largest), and the highest fence any node reports. It changes nothing.
//
// It returns an error matching ErrNoQuorum if fewer than a quorum of nodes
// answered, and one matching driver.ErrInvalid if a node store cannot inspect.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	for i, n := range s.nodes {
		if _, ok := n.(driver.Inspector); !ok {
			return driver.Info{}, fmt.Errorf("%w: redlock node %d cannot inspect locks", driver.ErrInvalid, i)
		}
	}
	rs := fanout(ctx, s.pool, s.timeout, s.all, func(ctx context.Context, i int) (driver.Info, error) {
		return s.nodes[i].(driver.Inspector).Inspect(ctx, key)
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
	return majorityView(answered, s.quorum), nil
}

// majorityView merges the nodes' answers: a holder must hold the key on at
// least q of them.
func majorityView(infos []driver.Info, q int) driver.Info {
	var out driver.Info
	count := map[string]int{}
	for _, in := range infos {
		out.Fence = max(out.Fence, in.Fence)
		if in.Held {
			count[in.Token]++
		}
	}
	for token, n := range count {
		if n < q {
			continue
		}
		var holds []int
		var remaining []time.Duration
		for _, in := range infos {
			if in.Held && in.Token == token {
				holds = append(holds, in.Holds)
				remaining = append(remaining, in.Remaining)
			}
		}
		out.Held, out.Token = true, token
		out.Holds, out.Remaining = kthLargest(holds, q), kthLargest(remaining, q)
	}
	return out
}
