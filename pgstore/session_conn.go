package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pinned connections. Every statement on a pinned connection runs in a
// goroutine of its own with a context detached from the caller's and
// bounded by the check interval: when the caller's context ends first the
// call returns at once (outcome unknown) and the statement finishes in the
// background, so that a caller's short deadline does not close a connection
// other locks live on (pgx closes a connection whose query is cancelled). A
// statement that gets no answer within the check interval does close it:
// its locks are then lost.

// pinned is one connection taken from the pool and held.
type pinned struct {
	c   *pgxpool.Conn
	sem chan struct{} // one statement at a time

	// Guarded by SessionStore.mu.
	locks   int  // holdings on it
	users   int  // calls and statements using it
	waiting bool // a queued wait owns it
	dead    bool // closed; its holdings are lost
	gone    bool // given back to the pool
}

// entry is the local state of one key: sem serializes the calls on the key
// in this store; h is the store's holding of it, if any.
type entry struct {
	sem  chan struct{}
	refs int // guarded by SessionStore.mu
	h    *holding
}

// holding is a key held on a pinned connection. Guarded by
// SessionStore.mu, and changed only by the call that holds the key's entry.
type holding struct {
	key    string
	dig    [32]byte
	p      *pinned
	id     int64
	holds  int
	fence  uint64
	lost   bool // its connection died
	closed bool // forgotten: counted out of p.locks
}

// connectWait bounds how long the store waits for the pool to open a new
// connection when it has room for one.
const connectWait = 10 * time.Second

// errConnDead is what a statement on a dead pinned connection returns.
var errConnDead = errors.New("pgstore: the pinned connection is closed")

// enter takes the key's entry, waiting for the call on it under way.
func (s *SessionStore) enter(ctx context.Context, key string) (*entry, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errSessionClosed
	}
	e := s.keys[key]
	if e == nil {
		e = &entry{sem: make(chan struct{}, 1)}
		s.keys[key] = e
	}
	e.refs++
	s.mu.Unlock()
	select {
	case e.sem <- struct{}{}:
		return e, nil
	case <-ctx.Done():
		s.drop(key, e)
		return nil, ctx.Err()
	}
}

// leave gives the key's entry up.
func (s *SessionStore) leave(key string, e *entry) {
	<-e.sem
	s.drop(key, e)
}

func (s *SessionStore) drop(key string, e *entry) {
	s.mu.Lock()
	e.refs--
	if e.refs == 0 && e.h == nil {
		delete(s.keys, key)
	}
	s.mu.Unlock()
}

// pick returns a pinned connection for a new holding, marked in use: the
// least used live one that is not waiting, or a new one when all are busy
// and the limit allows (the busy one after all if the pool has none to
// give). With no connection free of a wait and none to be had it returns
// ErrConnLimit or ErrPoolExhausted.
func (s *SessionStore) pick(ctx context.Context) (*pinned, error) {
	s.mu.Lock()
	var best *pinned
	for _, p := range s.pins {
		if !p.dead && !p.waiting && (best == nil || p.users < best.users) {
			best = p
		}
	}
	if best != nil && (best.users == 0 || len(s.pins) >= s.max) {
		best.users++
		s.mu.Unlock()
		return best, nil
	}
	s.mu.Unlock()
	p, err := s.pin(ctx, false)
	if err != nil && best != nil && (errors.Is(err, ErrPoolExhausted) || errors.Is(err, ErrConnLimit)) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !best.dead && !best.gone {
			best.users++ // no new connection: share the busy one
			return best, nil
		}
	}
	return p, err
}

// pin takes a new connection from the pool, marked in use (and waiting if
// waiting is set), within the store's limit and ConnWait.
func (s *SessionStore) pin(ctx context.Context, waiting bool) (*pinned, error) {
	s.mu.Lock()
	nwait := 0
	for _, p := range s.pins {
		if p.waiting {
			nwait++
		}
	}
	if len(s.pins) >= s.max || (waiting && nwait >= s.maxWait) {
		n := len(s.pins)
		s.mu.Unlock()
		return nil, fmt.Errorf("%w (%d of %d pinned, %d waiting)", ErrConnLimit, n, s.max, nwait)
	}
	p := &pinned{sem: make(chan struct{}, 1), users: 1, waiting: waiting}
	s.pins = append(s.pins, p) // reserves the slot
	s.mu.Unlock()
	// ConnWait bounds the wait for a free slot; a slot the pool has free
	// may take longer to connect (up to connectWait).
	limit := s.wait
	if st := s.pool.Stat(); st.AcquiredConns() < st.MaxConns() {
		limit = max(limit, connectWait)
	}
	actx, cancel := context.WithTimeout(ctx, limit)
	c, err := s.pool.Acquire(actx)
	cancel()
	if err == nil {
		if err = s.checkShared(ctx, c); err != nil {
			c.Release()
		}
	}
	if err == nil {
		s.mu.Lock()
		p.c = c
		closed := s.closed
		s.mu.Unlock()
		if !closed {
			return p, nil
		}
		c.Release()
		err = errSessionClosed
	}
	s.mu.Lock()
	s.removeLocked(p)
	s.mu.Unlock()
	if errors.Is(err, errSessionClosed) || errors.Is(err, ErrSharedSession) {
		return nil, err
	}
	if st := s.pool.Stat(); ctx.Err() == nil && actx.Err() != nil && st.AcquiredConns() >= st.MaxConns() {
		return nil, fmt.Errorf("%w: no connection within %v (pool MaxConns %d, %d in use)", ErrPoolExhausted, limit, st.MaxConns(), st.AcquiredConns())
	}
	return nil, fmt.Errorf("pgstore: take a connection from the pool: %w", err)
}

func (s *SessionStore) removeLocked(p *pinned) {
	for i, q := range s.pins {
		if q == p {
			s.pins = append(s.pins[:i], s.pins[i+1:]...)
			return
		}
	}
}

// unuse ends one use of p; see idleLocked.
func (s *SessionStore) unuse(p *pinned) {
	s.mu.Lock()
	p.users--
	s.idleLocked(p)
	s.mu.Unlock()
}

// idleLocked gives p back to the pool once it is no longer used and holds
// no lock (it holds no advisory lock then), or once it is dead (the pool
// destroys a closed connection). Called with s.mu held.
func (s *SessionStore) idleLocked(p *pinned) {
	if p.users == 0 && !p.gone && p.c != nil && (p.dead || (p.locks == 0 && !p.waiting)) {
		p.gone = true
		s.removeLocked(p)
		p.c.Release()
	}
}

// markDead records that p's connection is closed: every holding on it is
// lost. The connection goes back to the pool, which destroys it, when its
// last use ends.
func (s *SessionStore) markDead(p *pinned) {
	s.mu.Lock()
	if p.dead {
		s.mu.Unlock()
		return
	}
	p.dead = true
	s.removeLocked(p)
	for _, e := range s.keys {
		if e.h != nil && e.h.p == p {
			e.h.lost = true
		}
	}
	s.mu.Unlock()
}

// discard closes p's connection (the server frees its locks when it sees
// the close) and gives it back to the pool, which destroys it.
func (s *SessionStore) discard(p *pinned) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = p.c.Conn().Close(ctx)
	cancel()
	s.markDead(p)
	s.unuse(p)
}

// giveBack returns p, claimed by Close (p.gone set), to the pool, first
// unlocking its advisory locks if unlock is set; a connection that cannot
// be unlocked is closed instead. It waits for the statement under way on p;
// if ctx ends first the connection is closed, which frees its locks too.
func (p *pinned) giveBack(ctx context.Context, unlock bool) error {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("pgstore: close: a statement is still running on a pinned connection: %w", ctx.Err())
	}
	defer func() { <-p.sem }()
	var err error
	if unlock && !p.c.Conn().IsClosed() {
		if _, err = p.c.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
			_ = p.c.Conn().Close(ctx)
			err = fmt.Errorf("pgstore: unlock on close (the connection was closed instead): %w", err)
		}
	}
	p.c.Release()
	return err
}

// stmt is a statement run by run, with its local effects.
type stmt func(ctx context.Context, c *pgx.Conn) (any, error)

// run runs fn on p in a goroutine (see the top of this file) and returns
// its result, or the caller's context error if that ends first. late, if
// not nil, runs instead of the return when the caller gave up and fn
// succeeded (an Acquire undoes its lock there).
func (s *SessionStore) run(ctx context.Context, p *pinned, fn stmt, late func(context.Context, *pgx.Conn, any)) (any, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	dead := p.dead || p.gone
	p.users++
	s.mu.Unlock()
	if dead {
		<-p.sem
		s.unuse(p)
		return nil, errConnDead
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
	return nil, fmt.Errorf("pgstore: %w (the statement may still be applied)", ctx.Err())
}

// result is a statement's outcome.
type result struct {
	v   any
	err error
}

// call is one statement run by run: its outcome goes to ch unless the
// caller abandoned it first.
type call struct {
	mu        sync.Mutex
	abandoned bool
	ch        chan result
}

// exec runs fn on p for run (p.sem held and p in use; exec gives both
// back) and hands the outcome to c, or runs late if the caller gave up.
func (s *SessionStore) exec(ctx context.Context, p *pinned, fn stmt, late func(context.Context, *pgx.Conn, any), c *call) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.ttl)
	defer cancel()
	v, err := fn(sctx, p.c.Conn())
	if err != nil && p.c.Conn().IsClosed() {
		s.markDead(p)
		err = fmt.Errorf("%w: %w", errConnDead, err)
	}
	c.mu.Lock()
	if c.abandoned {
		c.mu.Unlock()
		if err == nil && late != nil {
			late(sctx, p.c.Conn(), v)
		}
		<-p.sem
		s.unuse(p)
		return
	}
	// Done with p before the caller goes on, so that a caller that finds
	// p idle can give it back at once.
	<-p.sem
	s.unuse(p)
	c.ch <- result{v, err}
	c.mu.Unlock()
}
