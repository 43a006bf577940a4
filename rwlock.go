package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/lease"
)

// RWLocks acquires read and write holdings of read-write locks from one
// store (driver.RWMutex): many readers of a key at once, or one writer
// alone, each holding a lease of its own (RWHolding). A waiting writer keeps
// readers that come after it out, so overlapping readers cannot starve it.
// It is safe for concurrent use; create one per store and share it. It does
// not own the store: Close releases its holdings and stops their renewal,
// not the store's connection. Stores that implement driver.RWMutex today:
// memstore and redisstore.
type RWLocks struct {
	store    driver.RWMutex
	model    driver.Model // the store's time model, read once
	cfg      config
	notifier driver.Notifier // the store's RWNotifier as the Pacer wants it; nil if none
	renewer  *lease.Renewer[Timer]

	mu      sync.Mutex
	held    map[*RWHolding]struct{} // live holdings, released by Close
	closed  atomic.Bool
	closing chan struct{}      // closed by Close: ends waits' sleeps
	bg      bgState            // background give-backs
	bgCtx   context.Context    // their context, cancelled if Close's ends first
	bgStop  context.CancelFunc // cancels bgCtx
}

// ErrUpgrade is what Lock, TryLock and Do return, at once and without I/O,
// when their context carries a read holding of the same key (RDo's): a read
// holding is never upgraded to write, as two upgrading readers would wait
// for each other for ever. It matches ErrInvalid. It is driver.ErrUpgrade.
var ErrUpgrade = driver.ErrUpgrade

// writerRetry bounds a waiting writer's pause between attempts: each
// refused attempt renews its writer-waiting mark, which lasts
// driver.WriterWaitTTL, so a writer that retries within half of it keeps
// readers that arrive after it out for as long as it waits. A variable for
// the tests' negative control only.
var writerRetry = driver.WriterWaitTTL / 2

// NewRWLocks returns an RWLocks for store with the given default options:
// WithTTL, WithAutoRenew, WithWait, WithBackoff, WithOnRetry and WithClock
// apply as they do to a Client (default: a DefaultLease lease, renewed);
// WithRead does not apply. It returns an error matching ErrInvalid, before
// any I/O, if store is nil or an option is out of range.
func NewRWLocks(store driver.RWMutex, opts ...Option) (*RWLocks, error) {
	if store == nil {
		return nil, invalidf("nil store")
	}
	model := store.Model()
	cfg := defaultConfig()
	cfg.ttl = defaultTTL(model)
	for _, o := range opts {
		o(&cfg)
	}
	if err := rwValidate(model, &cfg); err != nil {
		return nil, err
	}
	l := &RWLocks{store: store, model: model, cfg: cfg, held: make(map[*RWHolding]struct{}), closing: make(chan struct{})}
	if n, ok := driver.As[driver.RWNotifier](store); ok {
		l.notifier = rwNotifier{n}
	}
	l.renewer = lease.NewRenewer[Timer](cfg.clock, rwExtender{store})
	l.bgCtx, l.bgStop = context.WithCancel(context.Background())
	return l, nil
}

// rwValidate checks cfg as a Client's and refuses what does not apply to a
// read-write lock (WithRead), fitting the TTL to the store's model.
func rwValidate(model driver.Model, cfg *config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.read != nil {
		return invalidf("WithRead does not apply to a read-write lock")
	}
	return fitModel(model, &cfg.ttl)
}

// Store returns the store the RWLocks was created with.
func (l *RWLocks) Store() driver.RWMutex { return l.store }

// RLock takes a read holding of key, waiting while a writer holds key or
// waits for it, until the wait bound (WithWait) elapses or ctx ends; the
// holding is renewed until Release unless WithTTL is given. On failure it
// returns a nil holding and an error matching ErrNotAcquired and ctx's
// error (or ErrRefused, which ends the wait at once). Invalid arguments, a
// ctx that holds key already (RDo's or Do's) and calls after Close return
// ErrInvalid. An attempt that got no answer is released in the background.
func (l *RWLocks) RLock(ctx context.Context, key string, opts ...Option) (*RWHolding, error) {
	return l.lock(ctx, key, driver.RWRead, false, opts)
}

// Lock takes the write holding of key, waiting until no one holds it; while
// it waits, readers that arrive after it are kept out (writer preference),
// so it gets in once the readers ahead of it leave. A ctx that carries a
// read holding of key (RDo's) returns ErrUpgrade at once. Otherwise it
// behaves as RLock. A writer that gives up (ctx, wait bound) may keep new
// readers out for up to driver.WriterWaitTTL more.
func (l *RWLocks) Lock(ctx context.Context, key string, opts ...Option) (*RWHolding, error) {
	return l.lock(ctx, key, driver.RWWrite, false, opts)
}

// TryRLock makes one attempt to take a read holding of key and never
// waits: if a writer holds key or waits for it, it returns a nil holding
// and a *driver.RWTakenError (matching ErrNotAcquired). Other failures are
// as for RLock.
func (l *RWLocks) TryRLock(ctx context.Context, key string, opts ...Option) (*RWHolding, error) {
	return l.lock(ctx, key, driver.RWRead, true, opts)
}

// TryLock makes one attempt to take the write holding of key and never
// waits: if key is held it returns a nil holding and a *driver.RWTakenError
// (matching ErrNotAcquired), leaving a writer-waiting mark for
// driver.WriterWaitTTL. Other failures are as for Lock.
func (l *RWLocks) TryLock(ctx context.Context, key string, opts ...Option) (*RWHolding, error) {
	return l.lock(ctx, key, driver.RWWrite, true, opts)
}

func (l *RWLocks) lock(ctx context.Context, key string, mode driver.RWMode, try bool, opts []Option) (*RWHolding, error) {
	cfg, err := l.callConfig(ctx, key, mode, opts)
	if err != nil {
		return nil, err
	}
	if try {
		cfg.wait = 0
	}
	return l.acquire(ctx, key, mode, cfg)
}

// callConfig checks a call's arguments before any I/O and returns its
// configuration.
func (l *RWLocks) callConfig(ctx context.Context, key string, mode driver.RWMode, opts []Option) (config, error) {
	if ctx == nil {
		return config{}, invalidf("nil context")
	}
	if l.closed.Load() {
		return config{}, errRWClosed
	}
	cfg := l.cfg
	for _, o := range opts {
		o(&cfg)
	}
	if len(opts) > 0 {
		if err := rwValidate(l.model, &cfg); err != nil {
			return cfg, err
		}
	}
	if err := driver.ValidateRW(key, cfg.ttl); err != nil {
		return cfg, err
	}
	return cfg, l.nested(ctx, key, mode)
}

// nested refuses an acquisition of key through a context that carries a
// live holding of key from l (RDo's or Do's): an upgrade (ErrUpgrade) or a
// nested holding that could wait for its own holder (ErrInvalid).
func (l *RWLocks) nested(ctx context.Context, key string, mode driver.RWMode) error {
	for c, _ := ctx.Value(rwCtxKey{}).(*rwCtx); c != nil; c = c.outer {
		h := c.h
		if h.l != l || h.key != key || h.Err() != nil {
			continue
		}
		if h.Mode() == driver.RWRead && mode == driver.RWWrite {
			return fmt.Errorf("%w (read-write lock %q)", ErrUpgrade, key)
		}
		return invalidf("read-write lock %q is held by this context (%v): holdings are not re-entered; use the holding (Downgrade for write to read)", key, h.Mode())
	}
	return nil
}

// errRWClosed is what calls on a closed RWLocks fail with.
var errRWClosed error = &textError{"dlock: read-write locks closed", []error{ErrInvalid}}

// acquire makes attempts until one succeeds, an error is final, or the
// wait ends (see RLock and Lock).
func (l *RWLocks) acquire(ctx context.Context, key string, mode driver.RWMode, cfg config) (*RWHolding, error) {
	if ctx.Err() != nil {
		return nil, rwWaitError(ctx, ctx, key, mode, nil)
	}
	wctx := ctx
	if cfg.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, cfg.wait, errWaitElapsed)
		defer cancel()
	}
	token := newToken()
	pace := lease.NewPacer[Timer](cfg.clock, cfg.backoff, l.notifier, l.closing)
	defer pace.Stop()
	var last error
	unsure := false // an attempt got no answer: token may hold key
	for {
		if l.closed.Load() {
			return nil, l.failed(key, token, unsure, cfg, notAcquired(errRWClosed))
		}
		h, err := l.attempt(wctx, key, token, mode, cfg)
		if err == nil {
			return h, nil
		}
		var taken *driver.RWTakenError
		contended := errors.As(err, &taken)
		unsure = unsure || (!contended && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrRefused))
		switch {
		case errors.Is(err, ErrInvalid):
			return nil, l.failed(key, token, unsure, cfg, err)
		case errors.Is(err, ErrRefused) || (cfg.wait == 0 && wctx.Err() == nil):
			return nil, l.failed(key, token, unsure, cfg, notAcquired(err))
		case wctx.Err() != nil:
			return nil, l.failed(key, token, unsure, cfg, rwWaitError(ctx, wctx, key, mode, last))
		}
		last = err
		if cfg.onRetry != nil {
			cfg.onRetry(pace.Failures()+1, err)
		}
		if !pace.Pause(wctx, key, contended, rwPause(mode, taken), 0) {
			return nil, l.failed(key, token, unsure, cfg, rwWaitError(ctx, wctx, key, mode, last))
		}
	}
}

// rwPause is the remaining time the Pacer sleeps for at most after a
// refusal (taken, nil if the attempt failed otherwise): the store's
// Remaining, and for a writer never more than writerRetry, so that its
// next attempt renews its writer-waiting mark before the mark ends.
func rwPause(mode driver.RWMode, taken *driver.RWTakenError) time.Duration {
	remaining := time.Duration(-1)
	if taken != nil {
		remaining = taken.Remaining
	}
	if mode == driver.RWWrite && (remaining < 0 || remaining > writerRetry) {
		remaining = writerRetry
	}
	return remaining
}

// failed ends a wait with err, first giving back in the background what an
// attempt without an answer may have left to token.
func (l *RWLocks) failed(key, token string, unsure bool, cfg config, err error) error {
	if unsure {
		l.giveBack(key, token, cfg.ttl, time.Time{}, nil)
	}
	return err
}

// attempt makes one acquisition and turns a grant into an RWHolding, giving
// back a grant whose validity ran out before its reply arrived.
func (l *RWLocks) attempt(ctx context.Context, key, token string, mode driver.RWMode, cfg config) (*RWHolding, error) {
	start := cfg.clock.Now()
	var g driver.RWGrant
	var err error
	if mode == driver.RWWrite {
		g, err = l.store.AcquireWrite(ctx, key, token, cfg.ttl)
	} else {
		g, err = l.store.AcquireRead(ctx, key, token, cfg.ttl)
	}
	if err != nil {
		return nil, classify(err)
	}
	validUntil := lease.ValidUntil(start, g.TTL, cfg.ttl)
	if !cfg.clock.Now().Before(validUntil) {
		l.giveBack(key, token, cfg.ttl, time.Time{}, nil)
		return nil, fmt.Errorf("%w: read-write lock %q granted after its validity", ErrUnavailable, key)
	}
	return l.newHolding(ctx, key, token, mode, g, cfg, validUntil)
}

// rwWaitError explains why a wait for a holding ended, as semWaitError
// does for permits. It matches ErrNotAcquired.
func rwWaitError(ctx, wctx context.Context, key string, mode driver.RWMode, last error) error {
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
		why = errWaitElapsed.Error()
	default:
		errs = append(errs, wctx.Err())
		why = wctx.Err().Error()
	}
	msg := fmt.Sprintf("%v: read-write lock %q (%v): %s", ErrNotAcquired, key, mode, why)
	if last != nil {
		msg += " (last attempt: " + trimSentinels(last.Error()) + ")"
		errs = append(errs, last)
	}
	return &textError{msg, errs}
}

// rwNotifier is an RWNotifier as the lease engine's Pacer wants it
// (driver.Notifier).
type rwNotifier struct{ n driver.RWNotifier }

// Subscribe implements driver.Notifier.
func (r rwNotifier) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return r.n.SubscribeRW(ctx, key)
}
