package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"example.com/dlock"
)

// subscribeTimeoutFactor scales the node timeout into the bound for a node's
// subscription to be confirmed: subscribing costs a connection and a round
// trip, and a node that cannot confirm in time only loses its wake-ups.
const subscribeTimeoutFactor = 4

// Subscribe implements dlock.Notifier: it subscribes on every node that is a
// Notifier, in parallel, and merges their wake-ups into one channel (a
// Redlock release publishes on each node it reaches; the wake-ups coalesce).
// It returns as soon as a majority confirmed: every successful release
// reaches a majority too, and two majorities share a node, so no release is
// missed. Nodes that confirm later are dropped (their subscriptions ended);
// nodes that fail only cost wake-ups, and dlock's waiter still wakes at the
// holder's expiry. If fewer than a majority confirm, it waits for every
// node's answer (bounded by four node timeouts) and succeeds if at least one
// confirmed; if none did, it returns an error matching dlock.ErrUnavailable.
// cancel ends every kept subscription and the merging goroutine.
func (s *Store) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := dlock.ValidateKey(key); err != nil {
		return nil, nil, err
	}
	var notifiers []int
	for i, n := range s.nodes {
		if _, ok := n.(dlock.Notifier); ok {
			notifiers = append(notifiers, i)
		}
	}
	rs := s.subscribeAll(ctx, key, notifiers)
	var subs []sub
	var errs []error
	for pos, r := range rs {
		switch {
		case r.err == nil:
			subs = append(subs, r.val)
		case errors.Is(r.err, dlock.ErrInvalid):
			errs = append([]error{r.err}, errs...)
		default:
			errs = append(errs, &NodeError{Node: notifiers[pos], Err: r.err})
		}
	}
	if len(subs) == 0 || (len(errs) > 0 && errors.Is(errs[0], dlock.ErrInvalid)) {
		for _, sb := range subs {
			sb.cancel()
		}
		if len(errs) > 0 && errors.Is(errs[0], dlock.ErrInvalid) {
			return nil, nil, errs[0]
		}
		return nil, nil, fmt.Errorf("%w: redlock: no node subscribed: %w", dlock.ErrUnavailable, errors.Join(errs...))
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

// subscribeAll subscribes on nodes in parallel and returns once a majority
// confirmed or every node answered. Each goroutine hands its result over
// under mu; one that finishes after the hand-over ended cancels its own
// subscription, so none is left behind.
func (s *Store) subscribeAll(ctx context.Context, key string, nodes []int) []reply[sub] {
	var mu sync.Mutex
	sealed := false
	out := make([]reply[sub], len(nodes))
	for i := range out {
		out[i].err = errNoReply
	}
	done := make(chan struct{}, len(nodes))
	for pos, i := range nodes {
		go func() {
			nctx, cancel := context.WithTimeout(ctx, subscribeTimeoutFactor*s.timeout)
			defer cancel()
			ch, c, err := s.nodes[i].(dlock.Notifier).Subscribe(nctx, key)
			mu.Lock()
			defer mu.Unlock()
			if sealed {
				if err == nil {
					c()
				}
				return
			}
			out[pos] = reply[sub]{val: sub{ch, c}, err: err, answered: true}
			done <- struct{}{}
		}()
	}
	confirmed := 0
	for n := 0; n < len(nodes) && confirmed < s.quorum; n++ {
		<-done // every goroutine answers within its context's bound
		mu.Lock()
		confirmed = 0
		for _, r := range out {
			if r.answered && r.err == nil {
				confirmed++
			}
		}
		mu.Unlock()
	}
	mu.Lock()
	defer mu.Unlock()
	sealed = true
	return append([]reply[sub](nil), out...)
}
