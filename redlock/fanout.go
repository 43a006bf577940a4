package redlock

import (
	"context"
	"sync"
	"time"
)

// reply is one node's answer in a fan-out.
type reply[T any] struct {
	val      T
	err      error
	answered bool
}

// fanout calls call(ctx, i) for every node index in nodes concurrently, each
// under its own timeout, and gathers the replies until enough reports true
// for the replies so far, every node answered, the timeout passed, or ctx
// ended. It returns one reply per entry of nodes; nodes that had not answered
// by then have answered == false and err == errNoReply.
//
// One goroutine per node per call: this is the fan-out, bounded by the node
// count. A goroutine whose node has not answered when fanout returns finishes
// in the background when its call returns (within the timeout for go-redis
// clients set up with ClientOptions) and then hands its reply to late, if
// late is not nil, in that goroutine.
func fanout[T any](ctx context.Context, timeout time.Duration, nodes []int,
	call func(ctx context.Context, node int) (T, error), enough func(got []reply[T]) bool,
	late func(node int, val T, err error),
) []reply[T] {
	var mu sync.Mutex // orders hand-overs against the end of collection
	stopped := false
	ch := make(chan msg[T], len(nodes))
	for pos, node := range nodes {
		go func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			v, err := call(nctx, node)
			mu.Lock()
			if !stopped {
				ch <- msg[T]{pos, v, err}
				mu.Unlock()
				return
			}
			mu.Unlock()
			if late != nil {
				late(node, v, err)
			}
		}()
	}
	out := collect(ctx, timeout, ch, len(nodes), enough)
	mu.Lock()
	stopped = true
	mu.Unlock()
	for { // replies handed over before the stop are answers too
		select {
		case m := <-ch:
			out[m.pos] = reply[T]{val: m.val, err: m.err, answered: true}
		default:
			return out
		}
	}
}

// msg is a node's reply on its way from the node goroutine to fanout.
type msg[T any] struct {
	pos int
	val T
	err error
}

// collect gathers replies from ch until enough holds, all n arrived, the
// timeout passed or ctx ended.
func collect[T any](ctx context.Context, timeout time.Duration, ch <-chan msg[T], n int, enough func([]reply[T]) bool) []reply[T] {
	out := make([]reply[T], n)
	for i := range out {
		out[i].err = errNoReply
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for got := 0; got < n; {
		select {
		case m := <-ch:
			out[m.pos] = reply[T]{val: m.val, err: m.err, answered: true}
			got++
			if enough != nil && enough(out) {
				return out
			}
		case <-timer.C:
			return out
		case <-ctx.Done():
			return out
		}
	}
	return out
}
