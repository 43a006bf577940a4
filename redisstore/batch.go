package redisstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Opportunistic pipelining of the hot path. While a few acquires or
// releases are in flight, the calls other goroutines make queue up and go
// out together as one pipeline when one of the flights returns: one write
// and one read for the whole batch instead of a system call pair per call
// on both sides, which is most of what an uncontended lock+unlock costs
// Redis and the client. A call made while few are in flight is sent at
// once, so a lone caller pays only a mutex. No goroutine is started: one of
// the batch's callers sends it.
//
// Each call stays a separate EVALSHA with its own reply, so no guarantee
// changes: the batch is only a shared round trip. Contexts keep their
// meaning:
//   - a call whose context ends while it is queued is taken out of the batch
//     and never sent;
//   - a call whose context ends while its batch is on the wire returns
//     ctx.Err() at once, like a call that timed out (its script may or may
//     not have run);
//   - the batch is sent by the caller with the latest deadline (or none), so
//     no call's deadline is cut short, and nobody's cancellation fails the
//     other calls.

// batcher is the queue of a Store. The zero value is ready.
type batcher struct {
	mu       sync.Mutex
	inflight int    // calls or batches on the wire
	next     *batch // calls waiting for one of them, nil if none
}

// maxInflight is how many calls or batches may be on the wire at once
// before further calls wait to form a batch. Fewer flights make bigger
// batches (fewer system calls on both sides) but a longer wait for a queued
// call: about a quarter of a round trip with 2, an eighth with 4. Measured
// on loopback, 16 goroutines on distinct keys, dlock ÷ floor ops/s, median
// of 5 interleaved rounds (bench -rounds 5 -scenarios uncontended-16): 1:
// 0.76×; 2: 0.92×, 0.93×, 0.93×; 3: 0.86×; 4: 0.85×, 0.86×, 0.90×; 8: 0.78×.
const maxInflight = 2

// batch is a group of calls sent in one pipeline by its leader.
type batch struct {
	calls  []batchCall   // guarded by batcher.mu until send is closed
	leader int           // index of the call that sends; set when send closes
	send   chan struct{} // closed when the batch may go out
	done   chan struct{} // closed when every reply is in
}

// batchCall is one queued call. Its context is kept only while the call is
// queued, to pick the leader and the batch's deadline.
type batchCall struct {
	ctx  context.Context
	h    hotScript
	args []any
	left bool // the caller gave up before the batch was sent
	cmd  *redis.Cmd
}

var errNotSent = errors.New("redisstore: batched call not sent")

// run sends h with args (see hotScript.run), in a batch if enough calls
// are in flight.
func (s *Store) run(ctx context.Context, h hotScript, args []any) *redis.Cmd {
	b := s.batch
	if b == nil {
		return h.run(ctx, s.client, args)
	}
	b.mu.Lock()
	if b.inflight < maxInflight {
		b.inflight++
		b.mu.Unlock()
		defer b.sent() // even if a hook panics: the slot must come back
		return h.run(ctx, s.client, args)
	}
	if err := ctx.Err(); err != nil {
		b.mu.Unlock()
		return failed(ctx, err)
	}
	bt := b.next
	if bt == nil {
		bt = &batch{calls: make([]batchCall, 0, maxInflight), send: make(chan struct{}), done: make(chan struct{})}
		b.next = bt
	}
	i := len(bt.calls)
	bt.calls = append(bt.calls, batchCall{ctx: ctx, h: h, args: args})
	b.mu.Unlock()
	return bt.wait(ctx, b, s.client, i)
}

// wait is the part of run after call i joined bt.
func (bt *batch) wait(ctx context.Context, b *batcher, c redis.UniversalClient, i int) *redis.Cmd {
	select {
	case <-bt.send:
	case <-ctx.Done():
		b.mu.Lock()
		sent := b.next != bt
		if !sent {
			bt.calls[i].left = true
		}
		b.mu.Unlock()
		if !sent || bt.leader != i {
			return failed(ctx, ctx.Err())
		}
		// Chosen to lead just before giving up: the others depend on it.
	}
	if bt.leader == i {
		bt.lead(b, c)
	} else {
		select {
		case <-bt.done:
		case <-ctx.Done():
			return failed(ctx, ctx.Err())
		}
	}
	call := &bt.calls[i]
	switch {
	case call.cmd == nil: // the leader panicked before sending
		return failed(ctx, errNotSent)
	case isNoScript(call.cmd.Err()):
		return call.h.run(ctx, c, call.args) // falls back to EVAL
	}
	return call.cmd
}

func failed(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// sent ends the flight that just returned: the waiting batch, if any, goes
// out next in its place.
func (b *batcher) sent() {
	b.mu.Lock()
	bt := b.next
	b.next = nil
	if bt != nil && !bt.pickLeader() {
		bt = nil // every caller gave up: nothing to send
	}
	if bt == nil {
		b.inflight--
	}
	b.mu.Unlock()
	if bt != nil {
		close(bt.send)
	}
}

// pickLeader chooses, among the calls still waiting, the one with the
// latest deadline (a call without one first). It reports false if none is
// left. Called with batcher.mu held.
func (bt *batch) pickLeader() bool {
	bt.leader = -1
	var latest time.Time
	for i := range bt.calls {
		call := &bt.calls[i]
		if call.left || call.ctx.Err() != nil {
			call.left = true
			continue
		}
		d, ok := call.ctx.Deadline()
		if !ok {
			bt.leader = i
			break
		}
		if bt.leader < 0 || d.After(latest) {
			bt.leader, latest = i, d
		}
	}
	return bt.leader >= 0
}

// lead sends the batch and then frees its flight, even if a hook panics:
// the other callers of the batch and the slot must not wait forever. The
// batch carries the leader's deadline (the latest) but not its cancellation.
func (bt *batch) lead(b *batcher, c redis.UniversalClient) {
	defer b.sent()
	defer close(bt.done)
	own := bt.calls[bt.leader].ctx
	ctx := context.WithoutCancel(own)
	if d, ok := own.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	bt.exec(ctx, c)
}

// exec sends the batch's waiting calls as EVALSHA, in one pipeline if there
// are several. Errors are per call, in each call's Cmd.
func (bt *batch) exec(ctx context.Context, c redis.UniversalClient) {
	var pipe redis.Pipeliner
	for i := range bt.calls {
		call := &bt.calls[i]
		call.ctx = nil // not kept past the send
		if call.left {
			continue
		}
		call.args[0], call.args[1] = "evalsha", call.h.sha
		if len(bt.calls) == 1 { // cheaper without a pipeline
			call.cmd = c.Do(ctx, call.args...)
			return
		}
		if pipe == nil {
			pipe = c.Pipeline()
		}
		call.cmd = redis.NewCmd(ctx, call.args...)
		_ = pipe.Process(ctx, call.cmd)
	}
	if pipe != nil {
		_, _ = pipe.Exec(ctx)
	}
}
