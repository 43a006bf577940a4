package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/lease"
)

// Client acquires locks from one Store. It is safe for concurrent use; create
// one per store and share it. The Client does not own the store's connection:
// closing that is the caller's business, after Close (see Close).
type Client struct {
	store   driver.Mutex
	model   driver.Model // the store's time model, read once by New
	cfg     config
	renewer *lease.Renewer[Timer]
	queues  queues
	records records // the holdings of explicit Owners (record.go)
	caps    caps    // the store's optional capabilities, found once
	life    life    // Close's state: live leases, background clean-ups (close.go)
}

// New returns a Client for store with the given default options. It reads
// the store's time model once; every lease is then bounded and rounded by it
// (docs/api.md#new). It returns an error matching ErrInvalid, naming the
// bounds, if store is nil or an option is out of range.
func New(store driver.Mutex, opts ...Option) (*Client, error) {
	if store == nil {
		return nil, invalidf("nil store")
	}
	model := store.Model()
	cfg := defaultConfig()
	cfg.ttl = defaultTTL(model)
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := fitModel(model, &cfg.ttl); err != nil {
		return nil, err
	}
	c := &Client{store: store, model: model, cfg: cfg}
	c.caps = findCaps(store)
	if c.caps.notifier == nil && c.caps.queuer == nil {
		c.queues.minRun = maxHandoffRunPolled
	}
	c.renewer = lease.NewRenewer[Timer](cfg.clock, extender{c})
	c.life.init()
	return c, nil
}

// Store returns the store the client was created with: a driver.Mutex, whose
// optional capabilities (package driver) are found through any wrappers with
// driver.As.
func (c *Client) Store() driver.Mutex { return c.store }

// Lock acquires the lock on key, waiting until it is free, the wait bound
// (WithWait) elapses or ctx ends; the lease is renewed until Release unless
// WithTTL is given. On failure it returns a nil Lease and an error matching
// ErrNotAcquired, and also ctx.Err(), ErrUnavailable, or ErrRefused (which
// ends the wait at once); an attempt that got no answer is released in the
// background, and Close waits for that. Invalid arguments and calls after
// Close return ErrInvalid before any I/O. Queued stores and what a failure
// leaves behind: docs/api.md#clientlock.
func (c *Client) Lock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	cfg, err := c.callConfig(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	_, l, err := c.observedAcquire(ctx, callLock, key, cfg)
	return l, err
}

// TryLock makes one attempt to acquire the lock on key and never waits: if
// another owner holds it, or another goroutine of this Client holds a valid
// lease on it, it returns a nil Lease and a *ContendedError matching
// ErrNotAcquired. Other failures are as for Lock (docs/api.md#clienttrylock).
func (c *Client) TryLock(ctx context.Context, key string, opts ...Option) (*Lease, error) {
	cfg, err := c.callConfig(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	cfg.wait = 0
	_, l, err := c.observedAcquire(ctx, callTryLock, key, cfg)
	return l, err
}

// observedAcquire is acquire, with its wait's events if cfg has an
// Observer. It returns the call's context: ctx, or the one a CallObserver
// gave the call named name.
func (c *Client) observedAcquire(ctx context.Context, name, key string, cfg config) (context.Context, *Lease, error) {
	if cfg.obs == nil {
		l, err := c.acquire(ctx, key, cfg)
		return ctx, l, err
	}
	ctx = beginCall(ctx, cfg.obs, name, KindLock, key)
	start := waitStart(ctx, cfg.obs, cfg.clock, KindLock, key)
	l, err := c.acquire(ctx, key, cfg)
	var fence uint64
	var holds int
	if l != nil {
		fence, holds = l.fence, int(l.holds)
	}
	waitEnd(ctx, cfg.obs, cfg.clock, KindLock, key, start, fence, holds, err)
	return ctx, l, err
}

// Do acquires the lock on key as Lock does, runs fn with a context that
// carries the lease (LeaseFromContext) and is cancelled, cause ErrLost, if
// the lock is lost, and releases the lock when fn returns or panics. It
// returns the acquisition error (fn did not run), or fn's error joined with
// the release's, matching ErrLost if the lock was lost while fn ran. A nil fn
// returns ErrInvalid before any I/O. More: docs/api.md#clientdo.
func (c *Client) Do(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) error {
	if fn == nil {
		return invalidf("nil function")
	}
	cfg, err := c.callConfig(ctx, key, opts)
	if err != nil {
		return err
	}
	ctx, l, err := c.observedAcquire(ctx, callDo, key, cfg)
	if err != nil {
		return err
	}
	return runLocked(ctx, l, fn)
}

// runLocked calls fn under l and releases l however fn ends (runHeld).
func runLocked(ctx context.Context, l *Lease, fn func(context.Context) error) error {
	// The lease itself is the context's owner value: no Owner to allocate.
	return runHeld(ctx, context.WithValue(ctx, ownerKey{}, l), l.ttl, l.onLost, l.Release, fn)
}

// runHeld calls fn with a context derived from fctx that is cancelled,
// with the loss's cause, if the holding is lost (onLost), and releases the
// holding (release, bounded by releaseTimeout(ttl) and detached from ctx's
// cancellation) however fn ends. It returns fn's error joined with the
// release's, or the panic goes on. The release is deferred because a
// recovered panic (net/http recovers handler panics) would otherwise leave
// the holding renewed, and the key held, forever.
func runHeld(ctx, fctx context.Context, ttl time.Duration, onLost func(func(error)) func(), release func(context.Context) error, fn func(context.Context) error) (err error) {
	fctx, cancel := context.WithCancelCause(fctx)
	stop := onLost(cancel)
	returned := false
	defer func() {
		stop()
		cancel(nil)
		rctx, rcancel := releaseContext(ctx, ttl)
		rerr := release(rctx)
		rcancel()
		if returned {
			err = joinLine(err, rerr)
		}
	}()
	err = fn(fctx)
	returned = true
	return err
}

// releaseTimeout bounds a release made on the caller's behalf after its own
// context may have ended; past the TTL the key has expired anyway.
func releaseTimeout(ttl time.Duration) time.Duration {
	return min(ttl, 10*time.Second)
}

// releaseContext is the context of a release made on the caller's behalf:
// ctx's values without its cancellation, bounded by releaseTimeout(ttl).
func releaseContext(ctx context.Context, ttl time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout(ttl))
}

func (c *Client) callConfig(ctx context.Context, key string, opts []Option) (config, error) {
	if ctx == nil {
		return config{}, invalidf("nil context")
	}
	if err := ValidateKey(key); err != nil {
		return config{}, err
	}
	if c.life.closed.Load() {
		return config{}, errClosed
	}
	if len(opts) == 0 {
		return c.cfg, nil // validated by New; no copy escapes to the heap
	}
	cfg := c.cfg
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return cfg, err
	}
	return cfg, fitModel(c.model, &cfg.ttl)
}

// errWaitElapsed is the cause of the wait-bound context, to tell it apart
// from the caller's own deadline.
var errWaitElapsed = errors.New("wait bound elapsed")

func (c *Client) acquire(ctx context.Context, key string, cfg config) (*Lease, error) {
	if ctx.Err() != nil {
		// Nothing was sent: the context's own error, not the store's.
		return nil, waitError(ctx, ctx, key, nil)
	}
	o, owned := ownerFromContext(ctx)
	token := o.token
	if !owned {
		token = newToken()
	}
	wctx := ctx
	if cfg.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, cfg.wait, errWaitElapsed)
		defer cancel()
	}
	notifier, turn := c.turnNotifier(cfg)
	w := waiter{c: c, key: key, token: token, owned: owned, cfg: cfg, turn: turn,
		pace: lease.NewPacer[Timer](cfg.clock, cfg.backoff, notifier, c.life.closing)}
	yield := false
	if owned {
		if l, ok := LeaseFromContext(ctx); ok && l.c == c && l.key == key && l.token == token && l.rec.Load() == nil {
			c.adopt(wctx, l) // Do's function re-enters Do's lease: they share a record
		}
		var err error
		if w.rec, err = c.records.enter(wctx, key, token); err != nil {
			return nil, waitError(ctx, wctx, key, nil)
		}
		defer func() { c.acquired(w.rec, w.unsure) }()
	} else {
		var l *Lease
		var err error
		w.q, l, yield, err = c.queue(wctx, key, cfg)
		switch {
		case errors.Is(err, ErrNotAcquired):
			return nil, err
		case err != nil:
			return nil, waitError(ctx, wctx, key, errQueued)
		case l != nil:
			return c.track(ctx, l) // handed over by the previous local holder
		}
	}
	l, err := w.loop(wctx, yield)
	w.unsubscribe()
	if err != nil {
		return nil, w.failed(ctx, wctx, err)
	}
	return c.track(ctx, l)
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

// attempt makes one acquisition and turns a grant into a Lease, discarding a
// grant whose validity ran out before its reply arrived. rec is the owner's
// record when the token is an explicit Owner's (nil otherwise): the call
// then runs as the only one setting the record's expiry.
func (c *Client) attempt(ctx context.Context, key, token string, rec *record, cfg config, q *keyQueue) (*Lease, error) {
	if rec != nil {
		if err := c.records.begin(ctx, rec); err != nil {
			return nil, classify(err)
		}
		defer c.records.end(rec)
	}
	if cfg.meta != "" && c.caps.meta {
		ctx = driver.WithMeta(ctx, cfg.meta)
	}
	start := cfg.clock.Now()
	var g driver.Grant
	var rd *grantRead
	var err error
	switch qr := c.queuerFor(cfg); {
	case qr != nil && cfg.read != nil && c.caps.atomic != nil:
		rd = &grantRead{resource: *cfg.read}
		g, rd.Value, err = c.acquireQueuedRead(ctx, key, token, cfg.ttl, rd.resource)
	case qr != nil:
		g, err = c.acquireQueued(ctx, qr, key, token, cfg.ttl)
	case cfg.read != nil && c.caps.atomic != nil:
		rd = &grantRead{resource: *cfg.read}
		step := driver.Step{Action: driver.Acquire, Key: key, Token: token, TTL: cfg.ttl, Read: rd.resource}
		g, rd.Value, err = c.caps.atomic.Apply(ctx, step)
	default:
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
	if rec == nil && g.Holds > 1 {
		ghosts, g.Holds = g.Holds-1, 1
	}
	validUntil := lease.ValidUntil(start, g.TTL, cfg.ttl)
	if !cfg.clock.Now().Before(validUntil) {
		// The grant is unusable: give it back (an Owner's once its record
		// has no live holding left).
		if rec != nil {
			c.strayHold(rec)
		} else {
			c.giveBackNow(ctx, key, token, ghosts+1, cfg.ttl)
		}
		return nil, fmt.Errorf("%w: grant for %q arrived after its validity", ErrNotAcquired, key)
	}
	if ghosts > 0 {
		c.giveBackNow(ctx, key, token, ghosts, cfg.ttl)
	}
	return c.newLease(key, token, rec, g, cfg, validUntil, q, rd), nil
}

// acquireQueued waits for key in the store's own queue (driver.Queuer) until
// token holds it, ctx ends or the Client is closed.
func (c *Client) acquireQueued(ctx context.Context, qr driver.Queuer, key, token string, ttl time.Duration) (driver.Grant, error) {
	qctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.life.closeCtx, func() { cancel(errClosed) })
	defer stop()
	return qr.AcquireQueued(qctx, key, token, ttl)
}

// acquireQueuedRead is acquireQueued reading resource with the grant
// (driver.QueueReader).
func (c *Client) acquireQueuedRead(ctx context.Context, key, token string, ttl time.Duration, resource string) (driver.Grant, driver.Value, error) {
	qctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.life.closeCtx, func() { cancel(errClosed) })
	defer stop()
	return c.caps.qread.AcquireQueuedRead(qctx, key, token, ttl, resource)
}

// notAcquired makes sure an error from a failed attempt matches ErrNotAcquired.
func notAcquired(err error) error {
	if errors.Is(err, ErrNotAcquired) {
		return err
	}
	return tidy(fmt.Errorf("%w: %w", ErrNotAcquired, err))
}

// waitError explains, in one line, why a wait for key's lock ended (see
// waitErrorOf).
func waitError(ctx, wctx context.Context, key string, last error) error {
	return waitErrorOf(ctx, wctx, "lock", key, "", last)
}

// waitErrorOf explains, in one line, why a wait for a noun's key (detail
// appended to it) ended: the caller's context (the error matches ctx.Err()
// and its cause), the wait bound, or the wait context ending otherwise;
// with last, the last attempt's answer (matchable too), so that a wait on
// an unreachable store says why it was unreachable. It matches
// ErrNotAcquired.
func waitErrorOf(ctx, wctx context.Context, noun, key, detail string, last error) error {
	errs := []error{ErrNotAcquired}
	var why string
	switch err := ctx.Err(); {
	case err != nil:
		errs = append(errs, err)
		why = err.Error()
		if cause := context.Cause(ctx); cause != err {
			errs = append(errs, cause)
			why += " (" + trimSentinels(cause.Error()) + ")"
		}
	case errors.Is(context.Cause(wctx), errWaitElapsed):
		why = errWaitElapsed.Error() // not the caller's deadline: no context error
		errs = append(errs, errWaitElapsed)
	default:
		errs = append(errs, wctx.Err())
		why = wctx.Err().Error()
	}
	msg := fmt.Sprintf("%v: %s %q%s: %s", ErrNotAcquired, noun, key, detail, why)
	if last != nil {
		msg += " (last attempt: " + trimSentinels(last.Error()) + ")"
		errs = append(errs, last)
	}
	return &textError{msg, errs}
}
