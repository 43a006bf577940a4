package sqlsession

import (
	"context"
	"crypto/sha256"

	"example.com/dlock/driver"
)

// Holding is one key held on a pinned connection. Its fields are set once;
// its count of holds and its state are guarded by the Engine.
type Holding[C, L any] struct {
	Key   string
	Lock  L // the dialect's name of the key's lock (Dialect.Lock)
	P     *Conn[C]
	Fence uint64

	dig    [32]byte // the token's digest: never the token itself
	holds  int
	lost   bool // lost (also when P died: see lostLocked)
	closed bool // forgotten: counted out of P's locks
}

// entry is the local state of one key: sem serializes the calls on the key
// in one store; h is the store's holding of it, if any.
type entry[C, L any] struct {
	key  string
	sem  chan struct{}
	refs int // guarded by Engine.mu
	h    *Holding[C, L]
}

func digest(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// enter takes key's entry, waiting for the call on it under way; after
// Close it returns Options.ErrClosed.
func (e *Engine[C, L]) enter(ctx context.Context, key string) (*entry[C, L], error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, e.opts.ErrClosed
	}
	en := e.keys[key]
	if en == nil {
		en = &entry[C, L]{key: key, sem: make(chan struct{}, 1)}
		e.keys[key] = en
	}
	en.refs++
	e.mu.Unlock()
	select {
	case en.sem <- struct{}{}:
		return en, nil
	case <-ctx.Done():
		e.drop(en)
		return nil, ctx.Err()
	}
}

// leave gives the entry up.
func (e *Engine[C, L]) leave(en *entry[C, L]) {
	<-en.sem
	e.drop(en)
}

func (e *Engine[C, L]) drop(en *entry[C, L]) {
	e.mu.Lock()
	en.refs--
	if en.refs == 0 && en.h == nil && e.keys[en.key] == en {
		delete(e.keys, en.key)
	}
	e.mu.Unlock()
}

// live returns the entry's holding, or nil (forgetting it) if it is lost.
func (e *Engine[C, L]) live(en *entry[C, L]) *Holding[C, L] {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := en.h
	if h != nil && e.lostLocked(h) {
		e.forgetLocked(en, h)
		return nil
	}
	return h
}

// lostLocked reports whether h is lost: marked so, or its connection died.
func (e *Engine[C, L]) lostLocked(h *Holding[C, L]) bool {
	return h.lost || e.Pins.Dead(h.P)
}

// record makes a new holding of key by token on p (one hold, fence) the
// entry's, counted on p (Pins.AddLock); a previous holding is lost.
func (e *Engine[C, L]) record(en *entry[C, L], p *Conn[C], lock L, token string, fence uint64) driver.Grant {
	h := &Holding[C, L]{Key: en.key, Lock: lock, P: p, Fence: fence, dig: digest(token), holds: 1}
	e.mu.Lock()
	defer e.mu.Unlock()
	if old := en.h; old != nil {
		old.lost = true
		e.forgetLocked(en, old)
	}
	en.h = h
	if e.d.Held != nil {
		e.d.Held(en.key)
	}
	e.Pins.AddLock(p)
	return e.grantLocked(h)
}

// forget drops h, the entry's holding (lost, or released on the server).
func (e *Engine[C, L]) forget(en *entry[C, L], h *Holding[C, L]) {
	e.mu.Lock()
	e.forgetLocked(en, h)
	e.mu.Unlock()
}

func (e *Engine[C, L]) forgetLocked(en *entry[C, L], h *Holding[C, L]) {
	if en.h == h {
		en.h = nil
		if e.d.Freed != nil {
			e.d.Freed(h.Key)
		}
		if en.refs == 0 && e.keys[h.Key] == en { // forgotten after its call returned
			delete(e.keys, h.Key)
		}
	}
	if !h.closed {
		h.closed = true
		e.Pins.DropLock(h.P)
	}
}

// lose marks h lost.
func (e *Engine[C, L]) lose(h *Holding[C, L]) {
	e.mu.Lock()
	h.lost = true
	e.mu.Unlock()
}

// Lose forgets every holding on p and kills p (Pins.Kill): the server
// frees its locks.
func (e *Engine[C, L]) Lose(p *Conn[C]) {
	e.mu.Lock()
	for _, en := range e.keys {
		if h := en.h; h != nil && h.P == p {
			h.lost = true
			e.forgetLocked(en, h)
		}
	}
	e.mu.Unlock()
	e.Pins.Kill(p)
}

// Own returns the live holding of key by token, or nil.
func (e *Engine[C, L]) Own(key, token string) *Holding[C, L] {
	h := e.Peek(key)
	if h == nil || h.dig != digest(token) {
		return nil
	}
	return h
}

// Peek returns key's live holding, or nil. It waits for no call.
func (e *Engine[C, L]) Peek(key string) *Holding[C, L] {
	e.mu.Lock()
	defer e.mu.Unlock()
	if en := e.keys[key]; en != nil && en.h != nil && !e.lostLocked(en.h) {
		return en.h
	}
	return nil
}

// Reenter adds a hold to token's live holding of key, with no I/O, and
// reports whether there was one.
func (e *Engine[C, L]) Reenter(key, token string) (driver.Grant, bool) {
	dig := digest(token)
	e.mu.Lock()
	defer e.mu.Unlock()
	en := e.keys[key]
	if e.closed || en == nil || en.h == nil || e.lostLocked(en.h) || en.h.dig != dig {
		return driver.Grant{}, false
	}
	en.h.holds++
	return e.grantLocked(en.h), true
}

// Tracked reports whether the engine keeps an entry for key.
func (e *Engine[C, L]) Tracked(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.keys[key]
	return ok
}

// Grant returns h's grant: its fence, its holds, the check interval.
func (e *Engine[C, L]) Grant(h *Holding[C, L]) driver.Grant {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.grantLocked(h)
}

func (e *Engine[C, L]) grantLocked(h *Holding[C, L]) driver.Grant {
	return driver.Grant{Fence: h.Fence, Holds: h.holds, TTL: e.opts.TTL}
}

// addHolds adds n (maybe negative) to h's holds and returns the grant.
func (e *Engine[C, L]) addHolds(h *Holding[C, L], n int) driver.Grant {
	e.mu.Lock()
	defer e.mu.Unlock()
	h.holds += n
	return e.grantLocked(h)
}

// Closed reports whether Close was called.
func (e *Engine[C, L]) Closed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Close makes later calls fail with Options.ErrClosed, marks every holding
// lost and returns the connections Pins.Close claims: the caller gives each
// back (its locks with it). It reports whether this call closed the engine
// (a second call returns nil, false).
func (e *Engine[C, L]) Close() ([]*Conn[C], bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, false
	}
	e.closed = true
	claimed := e.Pins.Close() // a queued wait ends itself
	for _, en := range e.keys {
		if en.h != nil {
			en.h.lost = true
			if e.d.Freed != nil {
				e.d.Freed(en.key)
			}
		}
	}
	return claimed, true
}
