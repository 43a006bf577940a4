package dlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errClosed is what calls on a closed Client fail with.
var errClosed error = &textError{"dlock: client closed", []error{ErrInvalid}}

// life is a Client's lifecycle state: whether it is closed, the leases it
// holds (for Close to release) and its background clean-ups (for Close to
// wait for).
type life struct {
	closed  atomic.Bool     // checked on every call: an atomic load
	closing <-chan struct{} // closed by Close: wakes waits in progress
	// closed by Close, as closing: cancels queued acquisitions in progress
	closeCtx context.Context
	closeNow context.CancelCauseFunc
	// cancelled when Close gave up waiting for the background clean-ups:
	// they end then, leaving the rest to the keys' TTLs
	abandonCtx context.Context
	abandon    context.CancelFunc

	mu     sync.Mutex
	leases map[*Lease]struct{} // live leases handed to callers
	bg     bgState             // background clean-ups running
}

func (lf *life) init() {
	lf.closeCtx, lf.closeNow = context.WithCancelCause(context.Background())
	lf.abandonCtx, lf.abandon = context.WithCancel(context.Background())
	lf.closing = lf.closeCtx.Done()
	lf.leases = make(map[*Lease]struct{})
}

// track records l, about to be returned to the caller, so that Close can
// release it. If the Client was closed meanwhile, it releases l instead and
// fails as a call after Close does.
func (c *Client) track(ctx context.Context, l *Lease) (*Lease, error) {
	// Under the lease's mutex, as its end, which untracks: a lease that
	// ended before this point is never recorded.
	closed := false
	live := l.v.IfLive(func() {
		c.life.mu.Lock()
		closed = c.life.closed.Load()
		if !closed {
			c.life.leases[l] = struct{}{}
		}
		c.life.mu.Unlock()
	})
	if !live {
		return l, nil // already lost: the caller learns it from the lease
	}
	if !closed {
		return l, nil
	}
	l.silence() // the caller gets errClosed: the grant is not reported
	rctx, cancel := releaseContext(ctx, l.ttl)
	defer cancel()
	_ = l.Release(rctx)
	return nil, notAcquired(errClosed)
}

// untrack forgets l once it ended. Called when the lease ends, with its
// validity's mutex held.
func (c *Client) untrack(l *Lease) {
	c.life.mu.Lock()
	delete(c.life.leases, l)
	c.life.mu.Unlock()
}

// Close ends every lease the Client holds (Err then matches ErrLost and
// ErrInvalid), releases them and waits for the background give-backs, both
// within ctx; later calls fail with ErrInvalid. It returns nil, the release
// errors joined, or ctx's error; a second call returns nil. It does not
// close the store: close the Client, then the store, then the store's own
// client. More: docs/api.md#clientclose.
func (c *Client) Close(ctx context.Context) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	c.life.mu.Lock()
	if c.life.closed.Load() {
		c.life.mu.Unlock()
		return nil
	}
	c.life.closed.Store(true)
	c.life.closeNow(errClosed)
	held := make([]*Lease, 0, len(c.life.leases))
	for l := range c.life.leases {
		held = append(held, l)
	}
	c.life.mu.Unlock()
	var errs []error
	for _, l := range held {
		// Lost first: renewal stops and Do's function is told before the key
		// is freed; no handoff either, the client being closed.
		if !errors.Is(l.lose(errClosed), errClosed) {
			continue // it ended meanwhile, released or lost, on its own
		}
		if err := c.storeRelease(ctx, l.key, l.token, nil); err != nil && !isNotHeld(err) {
			errs = append(errs, err)
			if l.rec.Load() == nil { // a record gives back its own (record.go)
				c.giveBack(l.key, l.token, 1, l.ttl, time.Time{}, nil)
			}
		}
	}
	select {
	case <-c.life.bg.drained():
	case <-ctx.Done():
		c.life.abandon() // what is left expires with the keys' TTLs
		errs = append(errs, ctx.Err())
	}
	return joinLine(errs...)
}

// closedChan is the channel drained returns when nothing runs.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
