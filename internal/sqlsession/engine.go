package sqlsession

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"example.com/dlock/driver"
)

// Dialect is what a session store's SQL does with a key's lock, of type L
// (a lock id, a lock name). Errors the hooks return as final are returned
// as is; those of Check and Unlock go through Wrap.
type Dialect[C, L any] struct {
	// Lock names key's lock.
	Lock func(key string) L
	// TryLock takes key's lock on p without waiting, with a fence, running
	// its statement through Pins.Run (whose late result it undoes); ok is
	// false when another session holds it. Its errors are final.
	TryLock func(ctx context.Context, p *Conn[C], key string, lock L) (fence uint64, ok bool, err error)
	// Check is a statement asking c whether it still holds the lock
	// (mine) and, if the dialect knows, whether any session does (taken).
	Check func(ctx context.Context, c C, lock L) (mine, taken bool, err error)
	// Unlock is a statement giving the lock back on c; released is false
	// when c did not hold it.
	Unlock func(ctx context.Context, c C, lock L) (released bool, err error)
	// Taken asks the server, through the pool, whether any session holds
	// key's lock. Its errors are final.
	Taken func(ctx context.Context, key string) (bool, error)
	// Wrap gives a statement's error its context (op: "check", "release").
	Wrap func(op string, err error) error
	// Held and Freed, if set, are told when a key gets a holding and when
	// it has none any more (the engine's lock is held: they must not
	// block).
	Held, Freed func(key string)
}

// Options configure an Engine.
type Options struct {
	// Name prefixes the engine's own errors ("pgstore").
	Name string
	// TTL is the Grant.TTL of every grant: the check interval.
	TTL time.Duration
	// CheckReentry confirms a re-entry and a release that is not the last
	// hold on the holding's connection (one statement); else they are
	// counted with no I/O.
	CheckReentry bool
	// ErrClosed is returned by calls after Close.
	ErrClosed error
}

// Engine is the bookkeeping and the call flow of a session store: each
// key's holding (its token's digest, its pinned connection, its holds and
// fence), the calls on one key serialized, a lost holding (its connection
// dead, or its lock gone) forgotten when found. It is safe for concurrent
// use; its lock is never held during I/O.
type Engine[C, L any] struct {
	Pins *Pins[C]
	opts Options
	d    Dialect[C, L]

	mu     sync.Mutex
	keys   map[string]*entry[C, L]
	closed bool
}

// NewEngine returns an Engine holding its keys on pins.
func NewEngine[C, L any](pins *Pins[C], opts Options, d Dialect[C, L]) *Engine[C, L] {
	return &Engine[C, L]{Pins: pins, opts: opts, d: d, keys: map[string]*entry[C, L]{}}
}

func contended() error { return &driver.ContendedError{Remaining: -1} }

// Acquire takes key for token: a re-entry of token's live holding (checked
// on its connection under Options.CheckReentry), or the lock taken with
// Dialect.TryLock on a connection from Pins.Pick. A live holding of another
// token, confirmed on its connection, or a lock held elsewhere gives a
// *driver.ContendedError with Remaining -1.
func (e *Engine[C, L]) Acquire(ctx context.Context, key, token string) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	en, err := e.enter(ctx, key)
	if err != nil {
		return driver.Grant{}, err
	}
	defer e.leave(en)
	dig := digest(token)
	if h := e.live(en); h != nil {
		mine := h.dig == dig && !e.opts.CheckReentry
		if !mine {
			if mine, _, err = e.check(ctx, h); err != nil {
				return driver.Grant{}, err
			}
		}
		switch {
		case mine && h.dig != dig:
			return driver.Grant{}, contended()
		case mine:
			return e.addHolds(h, 1), nil
		}
		e.forget(en, h)
	}
	p, err := e.Pins.Pick(ctx)
	if err != nil {
		return driver.Grant{}, err
	}
	defer e.Pins.Unuse(p) // gives p up if it holds nothing
	lock := e.d.Lock(key)
	fence, ok, err := e.d.TryLock(ctx, p, key, lock)
	if err != nil {
		return driver.Grant{}, err
	}
	if !ok {
		return driver.Grant{}, contended()
	}
	return e.record(en, p, lock, token, fence), nil
}

// Extend confirms on the holding's connection that token still holds key
// (one statement) and returns its grant. A holding found lost (its
// connection died or no longer holds the lock) is forgotten: driver.NotHeld.
func (e *Engine[C, L]) Extend(ctx context.Context, key, token string) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	en, err := e.enter(ctx, key)
	if err != nil {
		return driver.Grant{}, err
	}
	defer e.leave(en)
	h := e.live(en)
	if h == nil {
		return driver.Grant{}, e.notHeld(ctx, key)
	}
	if err := e.confirm(ctx, en, h, token); err != nil {
		return driver.Grant{}, err
	}
	return e.Grant(h), nil
}

// confirm checks h on its connection for token: nil if token holds it,
// else driver.NotHeld (h forgotten if lost), or the check's error.
func (e *Engine[C, L]) confirm(ctx context.Context, en *entry[C, L], h *Holding[C, L], token string) error {
	mine, taken, err := e.check(ctx, h)
	switch {
	case err != nil:
		return err
	case !mine:
		e.forget(en, h)
		return driver.NotHeld(taken)
	case h.dig != digest(token):
		return driver.NotHeld(true)
	}
	return nil
}

// Release removes one of token's holds on key; the last one unlocks on the
// holding's connection (Dialect.Unlock) and forgets the holding, also when
// ctx ends first and the unlock succeeds later. A ctx already ended returns
// its error at once: nothing is sent and nothing changes.
func (e *Engine[C, L]) Release(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: session release %q: nothing sent, the lock is still held: %w", e.opts.Name, key, err)
	}
	en, err := e.enter(ctx, key)
	if err != nil {
		return err
	}
	defer e.leave(en)
	h := e.live(en)
	if h == nil {
		return e.notHeld(ctx, key)
	}
	last := e.Grant(h).Holds <= 1
	if h.dig != digest(token) || !last && e.opts.CheckReentry {
		if err := e.confirm(ctx, en, h, token); err != nil {
			return err
		}
	}
	if !last {
		e.addHolds(h, -1)
		return nil
	}
	return e.unlock(ctx, en, h)
}

// unlock gives back h's lock, the key's last hold.
func (e *Engine[C, L]) unlock(ctx context.Context, en *entry[C, L], h *Holding[C, L]) error {
	v, err := e.Pins.Run(ctx, h.P, func(ctx context.Context, c C) (any, error) {
		return e.d.Unlock(ctx, c, h.Lock)
	}, func(_ context.Context, _ C, _ any, err error) {
		if err == nil {
			e.forget(en, h)
		}
	})
	if errors.Is(err, ErrConnDead) {
		e.forget(en, h)
		return driver.NotHeld(false)
	}
	if err != nil {
		return e.d.Wrap("release", err)
	}
	e.forget(en, h)
	if !v.(bool) { // this connection did not hold it: lost earlier
		return e.notHeld(ctx, en.key)
	}
	return nil
}

// check asks h's connection whether it still holds h's lock (mine) and
// whether any session does (taken); h is marked lost if not mine. A dead
// connection reports neither.
func (e *Engine[C, L]) check(ctx context.Context, h *Holding[C, L]) (mine, taken bool, err error) {
	type res struct{ mine, taken bool }
	v, err := e.Pins.Run(ctx, h.P, func(ctx context.Context, c C) (any, error) {
		var r res
		var err error
		r.mine, r.taken, err = e.d.Check(ctx, c, h.Lock)
		return r, err
	}, nil)
	if errors.Is(err, ErrConnDead) {
		e.lose(h)
		return false, false, nil
	}
	if err != nil {
		return false, false, e.d.Wrap("check", err)
	}
	r := v.(res)
	if !r.mine {
		e.lose(h)
	}
	return r.mine, r.taken, nil
}

// notHeld returns driver.NotHeld(taken) for a key with no holding here,
// asking the server whether another session holds it.
func (e *Engine[C, L]) notHeld(ctx context.Context, key string) error {
	t, err := e.d.Taken(ctx, key)
	if err != nil {
		return err
	}
	return driver.NotHeld(t)
}

// Granted records the lock a queued wait got on p (pinned for the wait,
// Pins.Pin(ctx, true)) as token's holding of key, and gives up the wait's
// use of p. If key's entry cannot be had (Close, or a call on the key
// outlasting Options.TTL) p is discarded, which frees the lock.
func (e *Engine[C, L]) Granted(ctx context.Context, p *Conn[C], key, token string, fence uint64) (driver.Grant, error) {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.TTL)
	defer cancel()
	en, err := e.enter(ectx, key)
	if err != nil {
		e.Pins.Discard(p) // frees the lock
		return driver.Grant{}, fmt.Errorf("%s: acquire %q: granted but not recorded: %w", e.opts.Name, key, err)
	}
	defer e.leave(en)
	e.Pins.Settle(p)
	g := e.record(en, p, e.d.Lock(key), token, fence)
	e.Pins.Unuse(p)
	return g, nil
}
