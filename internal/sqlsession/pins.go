// Package sqlsession is the engine of the SQL session locks
// (pgstore.SessionStore, mysqlstore.SessionStore). Pins is the connection
// half: the connections a store pins from its pool, how many locks each
// carries, the bound on how many it pins (waits included), and how a
// statement runs on a pinned connection without the caller's cancellation
// closing it; what a connection is, how one is taken, given back and closed
// comes in as Hooks. Engine is the holdings half: each key's holding (a
// token's digest, its pinned connection, holds and fence), lost and dead
// detection, and the Acquire, Extend and Release flow; the lock statements
// come in as a Dialect. The queued wait's statement, Close's give-back and
// store-only features stay in the stores.
package sqlsession

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrConnDead is what a statement on a pinned connection returns once the
// connection is closed (or broke): every lock on it is lost.
var ErrConnDead = errors.New("the pinned connection is closed")

// Conn is one connection taken from the pool and pinned.
type Conn[C any] struct {
	C   C
	sem chan struct{} // one statement at a time

	// Guarded by Pins.mu.
	ready   bool // C is set (Hooks.Open returned)
	locks   int  // locks held on it
	users   int  // calls and statements using it
	waiting bool // a queued wait owns it
	dead    bool // closed; its locks are lost
	killed  bool // Hooks.Kill called (once)
	gone    bool // given up (Hooks.Drop, or claimed by Close)
}

// Hold takes the connection's statement slot (nothing else runs on it
// until Unhold), or returns ctx's error.
func (p *Conn[C]) Hold(ctx context.Context) error {
	select {
	case p.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unhold gives the statement slot back.
func (p *Conn[C]) Unhold() { <-p.sem }

// Hooks are what the dialect does with a connection. Drop and Kill are
// called with no statement of the store's running on it (Kill from a Run
// whose statement broke the connection runs after the statement).
type Hooks[C any] struct {
	// Open takes a new connection from the pool and makes it ready; its
	// error is returned as is (a pool-exhaustion sentinel, say).
	Open func(ctx context.Context) (C, error)
	// Drop gives up a connection that holds no lock, or is dead.
	Drop func(p *Conn[C])
	// Kill closes the connection for good: the server frees its locks.
	Kill func(p *Conn[C])
	// Broken reports whether err, a statement's error, left the connection
	// unusable (it is then killed and its locks are lost).
	Broken func(c C, err error) bool
	// Busy reports whether err, Open's, means the pool had no connection
	// to give: Pick then shares a busy pinned connection instead.
	Busy func(err error) bool
}

// Config bounds a Pins.
type Config struct {
	// MaxConns bounds the connections pinned at once, waits included.
	MaxConns int
	// MaxWaiting bounds those pinned by queued waits.
	MaxWaiting int
	// PerConn bounds the locks on one connection; 0: no bound.
	PerConn int
	// Timeout bounds a statement run by Run; past it the statement's
	// context ends (and the driver closes the connection).
	Timeout time.Duration
	// ErrLimit is wrapped by a refusal for capacity (it should match
	// driver.ErrUnavailable); ErrClosed is returned after Close.
	ErrLimit, ErrClosed error
}

// Pins is the set of connections a session store pins. It is safe for
// concurrent use; its lock is never held while a hook that may block on I/O
// runs, except Drop (which must not block).
type Pins[C any] struct {
	cfg   Config
	hooks Hooks[C]

	mu     sync.Mutex
	conns  []*Conn[C]
	closed bool
}

// New returns an empty Pins.
func New[C any](cfg Config, hooks Hooks[C]) *Pins[C] {
	return &Pins[C]{cfg: cfg, hooks: hooks}
}

// Pick returns a connection for a new lock, marked in use (Unuse ends the
// use): the least used live one that is not waiting and has room for a
// lock, or a new one when all are busy and the limit allows (the busy one
// after all if the pool has none to give). With none to be had it returns
// an error wrapping Config.ErrLimit, or Open's.
func (s *Pins[C]) Pick(ctx context.Context) (*Conn[C], error) {
	s.mu.Lock()
	var best *Conn[C]
	for _, p := range s.conns {
		if p.ready && !p.dead && !p.waiting && (s.cfg.PerConn == 0 || p.locks < s.cfg.PerConn) && (best == nil || p.users < best.users) {
			best = p
		}
	}
	if best != nil && (best.users == 0 || len(s.conns) >= s.cfg.MaxConns) {
		best.users++
		s.mu.Unlock()
		return best, nil
	}
	s.mu.Unlock()
	p, err := s.Pin(ctx, false)
	if err != nil && best != nil && (errors.Is(err, s.cfg.ErrLimit) || s.hooks.Busy != nil && s.hooks.Busy(err)) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !best.dead && !best.gone {
			best.users++ // no new connection: share the busy one
			return best, nil
		}
	}
	return p, err
}

// Pin takes a new connection (Hooks.Open), marked in use, and waiting if
// waiting is set (Settle ends that), within the limits.
func (s *Pins[C]) Pin(ctx context.Context, waiting bool) (*Conn[C], error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, s.cfg.ErrClosed
	}
	nwait := 0
	for _, p := range s.conns {
		if p.waiting {
			nwait++
		}
	}
	if len(s.conns) >= s.cfg.MaxConns || (waiting && nwait >= s.cfg.MaxWaiting) {
		n := len(s.conns)
		s.mu.Unlock()
		return nil, fmt.Errorf("%w (%d of %d pinned, %d waiting)", s.cfg.ErrLimit, n, s.cfg.MaxConns, nwait)
	}
	p := &Conn[C]{sem: make(chan struct{}, 1), users: 1, waiting: waiting}
	s.conns = append(s.conns, p) // reserves the slot
	s.mu.Unlock()
	c, err := s.hooks.Open(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		p.C, p.ready = c, true
		if !s.closed {
			return p, nil
		}
		p.gone = true
		s.hooks.Drop(p)
		err = s.cfg.ErrClosed
	}
	s.removeLocked(p)
	return nil, err
}

func (s *Pins[C]) removeLocked(p *Conn[C]) {
	for i, q := range s.conns {
		if q == p {
			s.conns = append(s.conns[:i], s.conns[i+1:]...)
			return
		}
	}
}

// Unuse ends one use of p (Pick, Pin); see idleLocked.
func (s *Pins[C]) Unuse(p *Conn[C]) {
	s.mu.Lock()
	p.users--
	s.idleLocked(p)
	s.mu.Unlock()
}

// idleLocked gives p up (Hooks.Drop) once it is no longer used and holds
// no lock, or once it is dead.
func (s *Pins[C]) idleLocked(p *Conn[C]) {
	if p.users == 0 && !p.gone && (p.dead || (p.locks == 0 && !p.waiting)) {
		p.gone = true
		s.removeLocked(p)
		s.hooks.Drop(p)
	}
}

// AddLock counts one more lock on p.
func (s *Pins[C]) AddLock(p *Conn[C]) {
	s.mu.Lock()
	p.locks++
	s.mu.Unlock()
}

// DropLock counts one lock less on p, and gives p up if it is idle.
func (s *Pins[C]) DropLock(p *Conn[C]) {
	s.mu.Lock()
	p.locks--
	s.idleLocked(p)
	s.mu.Unlock()
}

// Settle ends p's queued wait: p now serves locks like any other.
func (s *Pins[C]) Settle(p *Conn[C]) {
	s.mu.Lock()
	p.waiting = false
	s.mu.Unlock()
}

// Dead reports whether p is closed (its locks lost).
func (s *Pins[C]) Dead(p *Conn[C]) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return p.dead
}

// MarkDead records that p's connection is closed: its locks are lost. It
// is given up when its last use ends.
func (s *Pins[C]) MarkDead(p *Conn[C]) {
	s.mu.Lock()
	s.markDeadLocked(p)
	s.mu.Unlock()
}

func (s *Pins[C]) markDeadLocked(p *Conn[C]) {
	if !p.dead {
		p.dead = true
		s.removeLocked(p)
		s.idleLocked(p)
	}
}

// Kill closes p (Hooks.Kill: the server frees its locks) and marks it
// dead. It calls the hook only on a connection that is still open and
// was not killed before (a dead one may be back in the pool already), and
// never while a statement runs on it: with one under way (a Run whose
// caller gave up) the hook runs in the background once that statement
// ends, which Config.Timeout bounds; the connection counts as dead at once
// and is given up after the hook.
func (s *Pins[C]) Kill(p *Conn[C]) {
	select {
	case p.sem <- struct{}{}:
		s.killHeld(p)
		p.Unhold()
		return
	default:
	}
	s.mu.Lock()
	first := !p.killed && !p.dead && !p.gone
	p.killed = true
	if first {
		p.users++ // keeps p from being given up before the hook ran
	}
	s.markDeadLocked(p) // in the same step: Close claims no dead connection
	s.mu.Unlock()
	if first {
		go func() {
			_ = p.Hold(context.Background())
			s.hooks.Kill(p)
			p.Unhold()
			s.Unuse(p)
		}()
	}
}

// killHeld is Kill by the holder of p's statement slot.
func (s *Pins[C]) killHeld(p *Conn[C]) {
	s.mu.Lock()
	first := !p.killed && !p.dead && !p.gone
	p.killed = true
	s.mu.Unlock()
	if first {
		s.hooks.Kill(p)
	}
	s.MarkDead(p)
}

// Discard kills p and ends one use of it.
func (s *Pins[C]) Discard(p *Conn[C]) {
	s.Kill(p)
	s.Unuse(p)
}

// Len returns how many connections are pinned.
func (s *Pins[C]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Conns returns the pinned connections that are open, and not waiting
// unless waiting is set.
func (s *Pins[C]) Conns(waiting bool) []*Conn[C] {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Conn[C]
	for _, p := range s.conns {
		if p.ready && !p.gone && !p.dead && (waiting || !p.waiting) {
			out = append(out, p)
		}
	}
	return out
}

// Close makes later Pin and Pick calls fail with Config.ErrClosed and
// returns the connections it claims: every open one that is not waiting
// (a queued wait ends itself, and its Pin's caller gives it up). The
// caller gives each claimed connection back itself (Hold first). Calling
// it again returns nothing.
func (s *Pins[C]) Close() []*Conn[C] {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var out []*Conn[C]
	for _, p := range s.conns {
		if p.ready && !p.gone && !p.dead && !p.waiting {
			p.gone = true
			out = append(out, p)
		}
	}
	s.conns = nil
	return out
}
