package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Client acquires locks from one Store. It is safe for concurrent use; create
// one per store and share it. The Client does not own the store's connection:
// closing that is the caller's business.
type Client struct {
	store     Store
	cfg       config
	renewer   *renewer
	queues    queues
	reader    GrantReader // store as a GrantReader, or nil
	committer Committer   // store as a Committer, or nil
}

// New returns a Client for store with the given default options. It returns
// an error matching ErrInvalid if store is nil or an option is out of range.
func New(store Store, opts ...Option) (*Client, error) {
	if store == nil {
		return nil, invalidf("nil store")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{store: store, cfg: cfg}
	c.reader, _ = store.(GrantReader)
	c.committer, _ = store.(Committer)
	c.renewer = newRenewer(c)
	return c, nil
}

// Store returns the store the client was created with.
func (c *Client) Store() Store { return c.store }

// Lock acquires the lock on key, waiting while another owner holds it until
// the lock is free, the wait bound (WithWait) elapses, or ctx ends. By default
// the lease is renewed automatically until Release (see WithAutoRenew).
//
// On failure it returns a nil Lease and an error matching ErrNotAcquired, and
// leaves the store unchanged. If ctx ended, the error also matches ctx.Err();
// if the store was unreachable, it also matches ErrUnavailable. Invalid
// arguments return an error matching ErrInvalid before any I/O.
func (c *Client) Lock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	cfg, err := c.callConfig(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return c.acquire(ctx, key, cfg)
}

// TryLock makes a single attempt to acquire the lock on key. If another owner
// holds it, TryLock returns a nil Lease and a *ContendedError (which matches
// ErrNotAcquired) without waiting. If another goroutine of this Client holds
// or is already acquiring key, it fails that way at once, without asking the
// store. Other failures are as for Lock.
func (c *Client) TryLock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	cfg, err := c.callConfig(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	cfg.wait = 0
	return c.acquire(ctx, key, cfg)
}

// Do acquires the lock on key as Lock does, runs fn, and releases the lock
// when fn returns. fn's context carries the lease's owner (so nested calls on
// the same key re-enter) and is cancelled, with the loss as its cause, if the
// lock is lost while fn runs.
//
// Do returns the acquisition error if the lock was not acquired (fn does not
// run), otherwise fn's error joined with any release error. If the lock was
// lost while fn ran, the result matches ErrLost even when fn returned nil:
// fn's work may not have been protected.
func (c *Client) Do(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) error {
	if fn == nil {
		return invalidf("nil function")
	}
	l, err := c.Lock(ctx, key, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ContextWithOwner(ctx, Owner{l.token}))
	stop := l.onLost(cancel)
	ferr := fn(fctx)
	stop()
	cancel(nil)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout(l.ttl))
	defer rcancel()
	return errors.Join(ferr, l.Release(rctx))
}

// releaseTimeout bounds a release made on the caller's behalf after its own
// context may have ended; past the TTL the key has expired anyway.
func releaseTimeout(ttl time.Duration) time.Duration {
	return min(ttl, 10*time.Second)
}

func (c *Client) callConfig(ctx context.Context, key string, opts []Option) (config, error) {
	if ctx == nil {
		return config{}, invalidf("nil context")
	}
	if err := ValidateKey(key); err != nil {
		return config{}, err
	}
	if len(opts) == 0 {
		return c.cfg, nil // validated by New; no copy escapes to the heap
	}
	cfg := c.cfg
	for _, o := range opts {
		o(&cfg)
	}
	return cfg, cfg.validate()
}

// errWaitElapsed is the cause of the wait-bound context, to tell it apart
// from the caller's own deadline.
var errWaitElapsed = errors.New("wait bound elapsed")

func (c *Client) acquire(ctx context.Context, key string, cfg config) (*Lease, error) {
	token := newToken()
	o, explicit := OwnerFromContext(ctx)
	if explicit {
		token = o.token
	}
	wctx := ctx
	if cfg.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, cfg.wait, errWaitElapsed)
		defer cancel()
	}
	var q *keyQueue
	yield := false
	if !explicit {
		var l *Lease
		var err error
		q, l, yield, err = c.queue(wctx, key, cfg)
		switch {
		case errors.Is(err, ErrNotAcquired):
			return nil, err
		case err != nil:
			return nil, c.waitError(ctx, wctx, key, errQueued)
		case l != nil:
			return l, nil // handed over by the previous local holder
		}
	}
	l, err := c.acquireLoop(wctx, key, token, cfg, q, yield)
	if err != nil {
		if q != nil {
			c.queues.leave(key, q, false)
		}
		if errors.Is(err, ErrInvalid) || cfg.wait == 0 {
			return nil, err
		}
		if errors.Is(err, ErrRefused) {
			return nil, notAcquired(err)
		}
		return nil, c.waitError(ctx, wctx, key, err)
	}
	return l, nil
}

// errQueued is the "last error" of a wait that ended in the local queue.
var errQueued = &ContendedError{Remaining: -1}

// queue takes the key's local slot (see queue.go). A single try (wait 0)
// does not wait for it. If a local holder's lease is valid, the key is held
// in the store, so the try fails at once without a round trip. If the slot
// is busy only with a sibling's acquisition, the outcome is not known yet:
// the try then bypasses the queue (nil queue, nil error) and asks the store,
// so that it never reports contention on a key that is free.
func (c *Client) queue(ctx context.Context, key string, cfg config) (*keyQueue, *Lease, bool, error) {
	if cfg.wait != 0 {
		return c.queues.enter(ctx, key, cfg)
	}
	q, holder := c.queues.tryEnter(key)
	if q != nil || holder == nil {
		return q, nil, false, nil
	}
	if r := holder.Remaining(); r > 0 {
		return nil, nil, false, &ContendedError{Remaining: r}
	}
	return nil, nil, false, nil // the local holder's lease has ended
}

// acquireLoop makes attempts until one succeeds, the error is final, or the
// wait ends (it then returns the last attempt's error).
func (c *Client) acquireLoop(ctx context.Context, key, token string, cfg config, q *keyQueue, yield bool) (*Lease, error) {
	if yield && !sleep(ctx, cfg.clock, yieldDelay(), nil) {
		return nil, errQueued
	}
	w := waiter{c: c, key: key, cfg: cfg}
	defer w.unsubscribe()
	for first := true; ; first = false {
		l, err := c.attempt(ctx, key, token, cfg, q)
		if err == nil {
			if yield && first {
				c.queues.contended(q, false) // nobody took the key while we yielded
			}
			return l, nil
		}
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrRefused) {
			return nil, err
		}
		var ce *ContendedError
		if q != nil && errors.As(err, &ce) {
			c.queues.contended(q, true)
		}
		if cfg.wait == 0 {
			return nil, notAcquired(err)
		}
		if cfg.onRetry != nil {
			w.notify(err)
		}
		if !w.pause(ctx, err) {
			return nil, err
		}
	}
}

// attempt makes one acquisition and turns a grant into a Lease, discarding a
// grant whose validity ran out before its reply arrived.
func (c *Client) attempt(ctx context.Context, key, token string, cfg config, q *keyQueue) (*Lease, error) {
	start := cfg.clock.Now()
	var g Grant
	var v *Value
	var err error
	if cfg.read != nil && c.reader != nil {
		v = new(Value)
		g, *v, err = c.reader.AcquireRead(ctx, key, token, cfg.ttl, *cfg.read)
	} else {
		g, err = c.store.Acquire(ctx, key, token, cfg.ttl)
	}
	if err != nil {
		return nil, classify(err)
	}
	// Callers without an Owner use a fresh token, which cannot hold the key
	// yet: more holds than one mean an earlier attempt of this call was
	// applied although its reply was lost. Those ghost holds are given back,
	// so that one Release frees the key.
	ghosts := 0
	if _, owned := OwnerFromContext(ctx); !owned && g.Holds > 1 {
		ghosts, g.Holds = g.Holds-1, 1
	}
	validUntil := start.Add(g.TTL - drift(cfg.ttl))
	if !cfg.clock.Now().Before(validUntil) {
		c.releaseHolds(ctx, key, token, ghosts+1, cfg.ttl) // the grant is unusable
		return nil, fmt.Errorf("%w: grant for %q arrived after its validity", ErrNotAcquired, key)
	}
	c.releaseHolds(ctx, key, token, ghosts, cfg.ttl)
	return c.newLease(key, token, g, cfg, validUntil, q, v), nil
}

// releaseHolds gives back n holds of token on key, best effort: if the store
// cannot be reached they expire with the key's TTL.
func (c *Client) releaseHolds(ctx context.Context, key, token string, n int, ttl time.Duration) {
	if n <= 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout(ttl))
	defer cancel()
	for ; n > 0; n-- {
		if c.store.Release(rctx, key, token) != nil {
			return
		}
	}
}

// notAcquired makes sure an error from a failed attempt matches ErrNotAcquired.
func notAcquired(err error) error {
	if errors.Is(err, ErrNotAcquired) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotAcquired, err)
}

// waitError explains why a wait ended, keeping the context's error matchable.
func (c *Client) waitError(ctx, wctx context.Context, key string, last error) error {
	if ctx.Err() != nil {
		return errors.Join(notAcquired(last), ctx.Err())
	}
	if errors.Is(context.Cause(wctx), errWaitElapsed) {
		return fmt.Errorf("dlock: lock %q: wait bound elapsed: %w", key, notAcquired(last))
	}
	return errors.Join(notAcquired(last), wctx.Err())
}
