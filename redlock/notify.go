package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"example.com/dlock/driver"
)

// subscribeTimeoutFactor scales the node timeout into the bound for a node's
// subscription to be confirmed: subscribing costs a connection and a round
// trip, and a node that cannot confirm in time only loses its wake-ups.
const subscribeTimeoutFactor = 4

// Subscribe implements driver.Notifier: it subscribes on every node that is a
// Notifier, in parallel, and merges their wake-ups into one channel (a
// Redlock release publishes on each node it reaches; the wake-ups coalesce).
// It returns as soon as a majority confirmed: every successful release
// reaches a majority too, and two majorities share a node, so no release is
// missed. Nodes that confirm later are dropped (their subscriptions ended);
// nodes that fail only cost wake-ups, and dlock's waiter still wakes at the
// holder's expiry. If fewer than a majority confirm, it waits for every
// node's answer (bounded by four node timeouts) and succeeds if at least one
// confirmed; if none did, it returns an error matching driver.ErrUnavailable.
// Nodes are found to be Notifiers through wrappers (driver.As); if none is,
// it returns an error matching errors.ErrUnsupported.
// cancel ends every kept subscription and the merging goroutine.
func (s *Store) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := driver.ValidateKey(key); err != nil {
		return nil, nil, err
	}
	var notifiers []int
	for i, n := range s.nodes {
		if _, ok := driver.As[driver.Notifier](n); ok {
			notifiers = append(notifiers, i)
		}
	}
	if len(notifiers) == 0 {
		return nil, nil, driver.Unsupported("notifications", "no redlock node can notify releases")
	}
	rs := s.subscribeAll(ctx, key, notifiers)
	var subs []sub
	var errs []error
	for pos, r := range rs {
		switch {
		case r.err == nil:
			subs = append(subs, r.val)
		case errors.Is(r.err, driver.ErrInvalid):
			errs = append([]error{r.err}, errs...)
		default:
			errs = append(errs, &NodeError{Node: notifiers[pos], Err: r.err})
		}
	}
	if len(subs) == 0 || (len(errs) > 0 && errors.Is(errs[0], driver.ErrInvalid)) {
		for _, sb := range subs {
			sb.cancel()
		}
		if len(errs) > 0 && errors.Is(errs[0], driver.ErrInvalid) {
			return nil, nil, errs[0]
		}
		return nil, nil, fmt.Errorf("%w: redlock: no node subscribed: %w", driver.ErrUnavailable, errors.Join(errs...))
	}
	return merge(subs[0].ch, subs, func(sb sub) (<-chan struct{}, func()) { return sb.ch, sb.cancel })
}

// merge forwards wake-ups from every subscription to one channel with a
// single goroutine (reflect.Select over the node channels), which exits on
// cancel.
func merge[S any](first <-chan struct{}, subs []S, parts func(S) (<-chan struct{}, func())) (<-chan struct{}, func(), error) {
	if len(subs) == 1 {
		_, c := parts(subs[0])
		return first, c, nil
	}
	out := make(chan struct{}, 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(stop)}}
	var cancels []func()
	for _, sb := range subs {
		ch, c := parts(sb)
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		cancels = append(cancels, c)
	}
	go func() {
		defer close(done)
		for {
			if i, _, _ := reflect.Select(cases); i == 0 {
				return
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			close(stop)
			<-done
			for _, c := range cancels {
				c()
			}
		})
	}
	return out, cancel, nil
}

type sub struct {
	ch     <-chan struct{}
	cancel func()
}

// subscribeAll subscribes on nodes in parallel (a fan-out on the Store's
// workers) and returns once a majority confirmed, every node answered, or
// the subscribe bound passed. A subscription that succeeds after that is
// cancelled at once, so none is left behind.
func (s *Store) subscribeAll(ctx context.Context, key string, nodes []int) []reply[sub] {
	return fanout(ctx, s.pool, subscribeTimeoutFactor*s.timeout, nodes, func(ctx context.Context, i int) (sub, error) {
		nt, _ := driver.As[driver.Notifier](s.nodes[i])
		ch, c, err := nt.Subscribe(ctx, key)
		return sub{ch, c}, err
	}, func(rs []reply[sub]) bool {
		confirmed := 0
		for _, r := range rs {
			if r.answered && r.err == nil {
				confirmed++
			}
		}
		return confirmed >= s.quorum
	}, func(_ int, sb sub, err error) {
		if err == nil {
			sb.cancel()
		}
	})
}
