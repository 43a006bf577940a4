package redlock

import (
	"context"
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
// in the background when its call returns: within the timeout for go-redis
// clients with ContextTimeoutEnabled, otherwise within the client's own
// read/write timeouts. It writes into a buffered channel, so it never blocks.
func fanout[T any](ctx context.Context, timeout time.Duration, nodes []int,
	call func(ctx context.Context, node int) (T, error), enough func(got []reply[T]) bool,
) []reply[T] {
	type msg struct {
		pos int
		val T
		err error
	}
	ch := make(chan msg, len(nodes))
	for pos, node := range nodes {
		go func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			v, err := call(nctx, node)
			ch <- msg{pos, v, err}
		}()
	}
	out := make([]reply[T], len(nodes))
	for i := range out {
		out[i].err = errNoReply
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for n := 0; n < len(nodes); n++ {
		select {
		case m := <-ch:
			out[m.pos] = reply[T]{val: m.val, err: m.err, answered: true}
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
