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
// Redlock release publishes on each node; the wake-ups coalesce). It
// succeeds if at least one node subscribed; nodes that failed only cost
// wake-ups, and dlock's waiter still wakes at the holder's expiry. It
// returns an error matching dlock.ErrUnavailable if no node subscribed.
// cancel ends every node's subscription and the merging goroutine.
func (s *Store) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := dlock.ValidateKey(key); err != nil {
		return nil, nil, err
	}
	type sub struct {
		ch     <-chan struct{}
		cancel func()
	}
	var notifiers []int
	for i, n := range s.nodes {
		if _, ok := n.(dlock.Notifier); ok {
			notifiers = append(notifiers, i)
		}
	}
	// Wait for every node (each bounded by its context, as the Store
	// contract requires): a subscription must never be left uncancelled.
	rs := make([]reply[sub], len(notifiers))
	var wg sync.WaitGroup
	for pos, i := range notifiers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nctx, cancel := context.WithTimeout(ctx, subscribeTimeoutFactor*s.timeout)
			defer cancel()
			ch, c, err := s.nodes[i].(dlock.Notifier).Subscribe(nctx, key)
			rs[pos] = reply[sub]{val: sub{ch, c}, err: err, answered: true}
		}()
	}
	wg.Wait()
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
