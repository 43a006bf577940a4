package redlock

import (
	"context"
	"fmt"
	"sync"

	"example.com/dlock/driver"
)

var (
	_ driver.Lister        = (*Store)(nil)
	_ driver.WaiterCounter = (*Store)(nil)
)

// nodeCaps returns capability T of every node (found through wrappers with
// driver.As), or an error matching errors.ErrUnsupported naming the first
// node without it: a majority view needs every node's answer to be possible.
func nodeCaps[T any](s *Store, what string) ([]T, error) {
	out := make([]T, len(s.nodes))
	for i, n := range s.nodes {
		c, ok := driver.As[T](n)
		if !ok {
			return nil, driver.Unsupported(what, fmt.Sprintf("redlock node %d (%T) cannot %s", i, n, what))
		}
		out[i] = c
	}
	return out, nil
}

// Waiters implements driver.WaiterCounter with the largest count any node
// reports. Every waiting Store subscribes on all nodes (and keeps at least a
// majority), so summing would count each waiting process about once per
// node; the maximum never counts one twice. It can count fewer processes
// than are waiting when their subscriptions landed on different nodes, and
// counts any other subscriber of a node's release channel (a single-Redis
// store with the same prefix) as well. It needs a majority of nodes to
// answer within the node timeout, else it returns an error matching
// ErrNoQuorum; a node that cannot count waiters makes it return an error
// matching errors.ErrUnsupported.
func (s *Store) Waiters(ctx context.Context, key string) (int, error) {
	if err := driver.ValidateKey(key); err != nil {
		return 0, err
	}
	counters, err := nodeCaps[driver.WaiterCounter](s, "count waiters")
	if err != nil {
		return 0, err
	}
	rs := fanout(ctx, s.pool, s.timeout, s.all, func(ctx context.Context, i int) (int, error) {
		return counters[i].Waiters(ctx, key)
	}, func([]reply[int]) bool { return false }, nil)
	most, ok := 0, 0
	var errs []error
	for i, r := range rs {
		if r.answered && r.err == nil {
			most, ok = max(most, r.val), ok+1
		} else {
			errs = append(errs, &NodeError{Node: i, Err: r.err})
		}
	}
	if ok < s.quorum {
		return 0, noQuorum("waiter count", ok, len(s.nodes), s.quorum, errs, ctx.Err())
	}
	return most, nil
}

// List implements driver.Lister with the majority's view, as Inspect gives
// it for one key: it lists every node (each node's own Lister, in parallel,
// waiting for all of them within ctx), and reports each key any node has
// state for, held by a token only if that token holds it on a quorum of
// the nodes (a node that does not list a key counts as not holding it),
// with the hold count and remaining time a quorum agrees on and the highest
// fence any node reports. Keys held by a minority (a failed or half-released
// acquisition) are reported as not held. It calls fn from the calling
// goroutine, once per key, after every node answered.
//
// It returns an error matching ErrNoQuorum, and calls fn for nothing, if
// fewer than a quorum of nodes could be listed; a node that cannot list
// makes it return an error matching errors.ErrUnsupported.
func (s *Store) List(ctx context.Context, prefix string, fn func(key string, info driver.Info) bool) error {
	listers, err := nodeCaps[driver.Lister](s, "list keys")
	if err != nil {
		return err
	}
	views := make([]map[string]driver.Info, len(s.nodes))
	errs := make([]error, len(s.nodes))
	var wg sync.WaitGroup
	for i, l := range listers {
		wg.Go(func() {
			m := map[string]driver.Info{}
			errs[i] = l.List(ctx, prefix, func(k string, in driver.Info) bool { m[k] = in; return true })
			views[i] = m
		})
	}
	wg.Wait()
	return s.reportMajority(ctx, views, errs, fn)
}

// reportMajority merges the nodes' listings (views[i] is node i's, valid
// when errs[i] is nil) and reports each key's majority view to fn.
func (s *Store) reportMajority(ctx context.Context, views []map[string]driver.Info, errs []error, fn func(string, driver.Info) bool) error {
	var answered []map[string]driver.Info
	var nodeErrs []error
	keys := map[string]struct{}{}
	for i, v := range views {
		if errs[i] != nil {
			nodeErrs = append(nodeErrs, &NodeError{Node: i, Err: errs[i]})
			continue
		}
		answered = append(answered, v)
		for k := range v {
			keys[k] = struct{}{}
		}
	}
	if len(answered) < s.quorum {
		return noQuorum("list", len(answered), len(s.nodes), s.quorum, nodeErrs, ctx.Err())
	}
	infos := make([]driver.Info, len(answered))
	for k := range keys {
		for i, v := range answered {
			infos[i] = v[k] // absent: the zero Info, not held
		}
		if !fn(k, s.view(k, infos)) {
			return nil
		}
	}
	return nil
}
