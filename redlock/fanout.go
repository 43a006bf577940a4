package redlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// reply is one node's answer in a fan-out.
type reply[T any] struct {
	val      T
	err      error
	answered bool
}

// fanout calls call(ctx, i) for every node index in nodes concurrently, on
// p's goroutines, and gathers the replies until enough reports true for the
// replies so far, every node answered, the timeout passed, or ctx ended. It
// returns one reply per entry of nodes; nodes that had not answered by then
// have answered == false and err == errNoReply.
//
// All node calls share one context bounded by the timeout: they start
// together, so one deadline serves them all, and it is cancelled only once
// every node call returned. A node that has not answered when fanout returns
// finishes in the background when its call returns (within the timeout for
// go-redis clients set up with ClientOptions) and then hands its reply to
// late, if late is not nil, on the goroutine that ran its call.
func fanout[T any](ctx context.Context, p *pool, timeout time.Duration, nodes []int,
	call func(ctx context.Context, node int) (T, error), enough func(got []reply[T]) bool,
	late func(node int, val T, err error),
) []reply[T] {
	if len(nodes) == 0 {
		return nil
	}
	f := &fan[T]{nodes: nodes, call: call, late: late, ch: make(chan msg[T], len(nodes))}
	f.ctx, f.cancel = context.WithTimeout(ctx, timeout)
	f.left.Store(int32(len(nodes)))
	run := f.run
	for pos := range nodes {
		p.do(task{run, pos})
	}
	out := collect(f.ctx, f.ch, len(nodes), enough)
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	for { // replies handed over before the stop are answers too
		select {
		case m := <-f.ch:
			out[m.pos] = reply[T]{val: m.val, err: m.err, answered: true}
		default:
			return out
		}
	}
}

// fan is the state one fanout shares with its node calls.
type fan[T any] struct {
	ctx    context.Context // every node call's: the call's one timeout
	cancel context.CancelFunc
	nodes  []int
	call   func(ctx context.Context, node int) (T, error)
	late   func(node int, val T, err error)
	ch     chan msg[T]  // buffered for every node: a hand-over never blocks
	left   atomic.Int32 // node calls that have not returned yet

	mu      sync.Mutex // orders hand-overs against the end of collection
	stopped bool
}

// run makes the node call at position pos and hands its reply to fanout,
// or to late once fanout stopped collecting.
func (f *fan[T]) run(pos int) {
	node := f.nodes[pos]
	v, err := f.call(f.ctx, node)
	f.mu.Lock()
	handed := !f.stopped
	if handed {
		f.ch <- msg[T]{pos, v, err}
	}
	f.mu.Unlock()
	// Cancel only after the hand-over: collect sees every reply of a
	// complete fan-out before the cancelled context.
	if f.left.Add(-1) == 0 {
		f.cancel()
	}
	if !handed && f.late != nil {
		f.late(node, v, err)
	}
}

// msg is a node's reply on its way from the node call to fanout.
type msg[T any] struct {
	pos int
	val T
	err error
}

// collect gathers replies from ch until enough holds, all n arrived, or
// ctx (the fan-out's context: its timeout or the caller's end) is done.
func collect[T any](ctx context.Context, ch <-chan msg[T], n int, enough func([]reply[T]) bool) []reply[T] {
	out := make([]reply[T], n)
	for i := range out {
		out[i].err = errNoReply
	}
	for got := 0; got < n; {
		select {
		case m := <-ch:
			out[m.pos] = reply[T]{val: m.val, err: m.err, answered: true}
			got++
			if enough != nil && enough(out) {
				return out
			}
		case <-ctx.Done():
			return out
		}
	}
	return out
}
