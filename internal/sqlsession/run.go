package sqlsession

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The statement runner: how a statement runs on a pinned connection
// without the caller's cancellation closing it (Run), a queued wait (Wait)
// and a round trip on every connection (Ping).

// Stmt is a statement Run runs on a connection.
type Stmt[C any] func(ctx context.Context, c C) (any, error)

// Late gets a statement's outcome when the caller of Run gave up before it
// came (an Acquire undoes its lock there). It runs with the statement slot
// held, on the statement's context.
type Late[C any] func(ctx context.Context, c C, v any, err error)

// Run runs fn on p in a goroutine of its own, one statement at a time, with
// a context detached from ctx and bounded by Config.Timeout: when ctx ends
// first Run returns at once with ctx's error (the outcome is unknown) and
// the statement finishes in the background, its outcome going to late if
// not nil. A caller's short deadline thus never closes a connection other
// locks live on (the drivers close a connection whose query is
// cancelled). A statement whose error broke the connection (Hooks.Broken)
// kills it, marks it dead and returns an error wrapping ErrConnDead; so
// does a call on a connection already dead.
func (s *Pins[C]) Run(ctx context.Context, p *Conn[C], fn Stmt[C], late Late[C]) (any, error) {
	if err := p.Hold(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	dead := p.dead || p.gone
	p.users++
	s.mu.Unlock()
	if dead {
		p.Unhold()
		s.Unuse(p)
		return nil, ErrConnDead
	}
	c := &call{ch: make(chan result, 1)}
	go s.exec(ctx, p, fn, late, c)
	select {
	case r := <-c.ch:
		return r.v, r.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case r := <-c.ch:
		return r.v, r.err
	default:
	}
	c.abandoned = true
	return nil, fmt.Errorf("%w (the statement may still be applied)", ctx.Err())
}

// result is a statement's outcome.
type result struct {
	v   any
	err error
}

// call is one statement run by Run: its outcome goes to ch unless the
// caller abandoned it first.
type call struct {
	mu        sync.Mutex
	abandoned bool
	ch        chan result
}

// exec runs fn on p for Run (p's slot held and p in use; exec gives both
// back) and hands the outcome to c, or to late if the caller gave up.
func (s *Pins[C]) exec(ctx context.Context, p *Conn[C], fn Stmt[C], late Late[C], c *call) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
	defer cancel()
	v, err := fn(sctx, p.C)
	if err != nil && s.hooks.Broken(p.C, err) {
		s.killHeld(p)
		err = fmt.Errorf("%w: %w", ErrConnDead, err)
	}
	c.mu.Lock()
	if c.abandoned {
		c.mu.Unlock()
		if late != nil {
			late(sctx, p.C, v, err)
		}
		p.Unhold()
		s.Unuse(p)
		return
	}
	// Done with p before the caller goes on, so that a caller that finds
	// p idle can give it back at once.
	p.Unhold()
	s.Unuse(p)
	c.ch <- result{v, err}
	c.mu.Unlock()
}

// Wait runs fn, a statement that waits in the server's lock queue, on p
// (pinned for the wait: Pin(ctx, true)), with p's slot held and a context
// detached from ctx. When ctx ends first, or stop is closed, it asks the
// server to end the statement (cancel); if that fails, or the statement
// has not ended grace later, it cancels the statement's context (the
// drivers then close the connection). It then discards p, which frees a
// lock granted just as the wait ended, and returns ctx's error, or
// Config.ErrClosed after stop. On fn's error p is discarded and the error
// returned; on success p stays pinned and waiting (Settle, AddLock and
// Unuse take it over; Discard gives it up).
func (s *Pins[C]) Wait(ctx context.Context, p *Conn[C], stop <-chan struct{}, grace time.Duration, fn Stmt[C], cancel func(p *Conn[C]) error) (any, error) {
	_ = p.Hold(context.Background()) // free: nothing else runs on a waiting connection
	defer p.Unhold()
	qctx, qcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer qcancel()
	done := make(chan result, 1)
	go func() {
		v, err := fn(qctx, p.C)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			s.killHeld(p)
			s.Unuse(p)
		}
		return r.v, r.err
	case <-ctx.Done():
	case <-stop:
	}
	ended := false
	if cancel(p) == nil {
		t := time.NewTimer(grace)
		select {
		case <-done:
			ended = true
		case <-t.C:
		}
		t.Stop()
	}
	if !ended {
		qcancel()
		<-done
	}
	s.killHeld(p)
	s.Unuse(p)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, s.cfg.ErrClosed
}
