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

// Semaphores acquires permits of counting semaphores from one store
// (driver.Semaphore): at most limit permits of a key are out at once, each
// holding a lease of its own (Permit). It is safe for concurrent use;
// create one per store and share it. It does not own the store: Close
// releases its permits and stops their renewal, not the store's
// connection. Stores that implement driver.Semaphore today: memstore and
// redisstore.
type Semaphores struct {
	store    driver.Semaphore
	model    driver.Model // the store's time model, read once
	cfg      config
	notifier driver.Notifier // the store's PermitNotifier as the Pacer wants it; nil if none
	renewer  *lease.Renewer[Timer]

	mu      sync.Mutex
	held    map[*Permit]struct{} // live permits, released by Close
	closed  atomic.Bool
	closing chan struct{}      // closed by Close: ends waits' sleeps
	bg      bgState            // background give-backs
	bgCtx   context.Context    // their context, cancelled if Close's ends first
	bgStop  context.CancelFunc // cancels bgCtx
}

// NewSemaphores returns a Semaphores for store with the given default
// options: WithTTL, WithAutoRenew, WithWait, WithBackoff, WithOnRetry,
// WithClock and WithObserver apply as they do to a Client (default: a
// DefaultLease lease, renewed); WithRead does not apply. It returns an error matching
// ErrInvalid, before any I/O, if store is nil or an option is out of range.
func NewSemaphores(store driver.Semaphore, opts ...Option) (*Semaphores, error) {
	if store == nil {
		return nil, invalidf("nil store")
	}
	model := store.Model()
	cfg := defaultConfig()
	cfg.ttl = defaultTTL(model)
	for _, o := range opts {
		o(&cfg)
	}
	if err := semValidate(model, &cfg); err != nil {
		return nil, err
	}
	s := &Semaphores{store: store, model: model, cfg: cfg, held: make(map[*Permit]struct{}), closing: make(chan struct{})}
	if pn, ok := driver.As[driver.PermitNotifier](store); ok {
		s.notifier = permitNotifier{pn}
	}
	s.renewer = lease.NewRenewer[Timer](cfg.clock, permitExtender{store})
	s.bgCtx, s.bgStop = context.WithCancel(context.Background())
	return s, nil
}

// semValidate checks cfg as a Client's and refuses what does not apply to
// a semaphore (WithRead), fitting the TTL to the store's model.
func semValidate(model driver.Model, cfg *config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.read != nil {
		return invalidf("WithRead does not apply to a semaphore")
	}
	return fitModel(model, &cfg.ttl)
}

// Store returns the store the Semaphores was created with.
func (s *Semaphores) Store() driver.Semaphore { return s.store }

// Acquire takes permits of key's semaphore of limit permits, all at once,
// waiting until they are free, the wait bound (WithWait) elapses or ctx
// ends; the permit is renewed until Release unless WithTTL is given. While
// permits are out, limit must be the one stored with key. On failure it
// returns a nil Permit and an error matching ErrNotAcquired and ctx's error
// (or ErrRefused, which ends the wait at once). Invalid arguments, a limit
// that is not the key's, and calls after Close return ErrInvalid. An
// attempt that got no answer is released in the background.
func (s *Semaphores) Acquire(ctx context.Context, key string, limit, permits int, opts ...Option) (*Permit, error) {
	cfg, err := s.callConfig(ctx, key, limit, permits, opts)
	if err != nil {
		return nil, err
	}
	return s.observedAcquire(ctx, key, limit, permits, cfg)
}

// TryAcquire makes one attempt to take permits of key and never waits: if
// fewer are free it returns a nil Permit and a *driver.PermitsTakenError
// (matching ErrNotAcquired). Other failures are as for Acquire.
func (s *Semaphores) TryAcquire(ctx context.Context, key string, limit, permits int, opts ...Option) (*Permit, error) {
	cfg, err := s.callConfig(ctx, key, limit, permits, opts)
	if err != nil {
		return nil, err
	}
	cfg.wait = 0
	return s.observedAcquire(ctx, key, limit, permits, cfg)
}

// observedAcquire is acquire, with its wait's events if cfg has an Observer.
func (s *Semaphores) observedAcquire(ctx context.Context, key string, limit, permits int, cfg config) (*Permit, error) {
	if cfg.obs == nil {
		return s.acquire(ctx, key, limit, permits, cfg)
	}
	start := waitStart(ctx, cfg.obs, cfg.clock, KindPermit, key)
	p, err := s.acquire(ctx, key, limit, permits, cfg)
	var fence uint64
	var n int
	if p != nil {
		fence, n = p.fence, p.permits
	}
	waitEnd(ctx, cfg.obs, cfg.clock, KindPermit, key, start, fence, n, err)
	return p, err
}

// callConfig checks a call's arguments before any I/O and returns its
// configuration.
func (s *Semaphores) callConfig(ctx context.Context, key string, limit, permits int, opts []Option) (config, error) {
	if ctx == nil {
		return config{}, invalidf("nil context")
	}
	if s.closed.Load() {
		return config{}, errSemClosed
	}
	cfg := s.cfg
	for _, o := range opts {
		o(&cfg)
	}
	if len(opts) > 0 {
		if err := semValidate(s.model, &cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, driver.ValidatePermits(key, limit, permits, cfg.ttl)
}

// errSemClosed is what calls on a closed Semaphores fail with.
var errSemClosed error = &textError{"dlock: semaphores closed", []error{ErrInvalid}}

// acquire makes attempts until one succeeds, an error is final, or the
// wait ends (see Acquire).
func (s *Semaphores) acquire(ctx context.Context, key string, limit, k int, cfg config) (*Permit, error) {
	if ctx.Err() != nil {
		return nil, semWaitError(ctx, ctx, key, nil)
	}
	wctx := ctx
	if cfg.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, cfg.wait, errWaitElapsed)
		defer cancel()
	}
	token := newToken()
	pace := lease.NewPacer[Timer](cfg.clock, cfg.backoff, s.notifier, s.closing)
	defer pace.Stop()
	var last error
	unsure := false // an attempt got no answer: token may hold permits
	for {
		if s.closed.Load() {
			return nil, s.failed(key, token, unsure, cfg, notAcquired(errSemClosed))
		}
		p, err := s.attempt(wctx, key, token, limit, k, cfg)
		if err == nil {
			return p, nil
		}
		var pt *driver.PermitsTakenError
		contended := errors.As(err, &pt)
		unsure = unsure || (!contended && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrRefused))
		switch {
		case errors.Is(err, ErrInvalid):
			return nil, s.failed(key, token, unsure, cfg, err)
		case errors.Is(err, ErrRefused) || (cfg.wait == 0 && wctx.Err() == nil):
			return nil, s.failed(key, token, unsure, cfg, notAcquired(err))
		case wctx.Err() != nil:
			return nil, s.failed(key, token, unsure, cfg, semWaitError(ctx, wctx, key, last))
		}
		last = err
		if cfg.onRetry != nil {
			cfg.onRetry(pace.Failures()+1, err)
		}
		remaining := time.Duration(-1)
		if contended {
			remaining = pt.Remaining
		}
		if !pace.Pause(wctx, key, contended, remaining, 0) {
			return nil, s.failed(key, token, unsure, cfg, semWaitError(ctx, wctx, key, last))
		}
	}
}

// failed ends a wait with err, first giving back in the background what an
// attempt without an answer may have left to token.
func (s *Semaphores) failed(key, token string, unsure bool, cfg config, err error) error {
	if unsure {
		s.giveBack(key, token, cfg.ttl, time.Time{})
	}
	return err
}

// attempt makes one acquisition and turns a grant into a Permit, giving
// back a grant whose validity ran out before its reply arrived.
func (s *Semaphores) attempt(ctx context.Context, key, token string, limit, k int, cfg config) (*Permit, error) {
	start := cfg.clock.Now()
	g, err := s.store.AcquirePermits(ctx, key, token, limit, k, cfg.ttl)
	if err != nil {
		return nil, classify(err)
	}
	validUntil := lease.ValidUntil(start, g.TTL, cfg.ttl)
	if !cfg.clock.Now().Before(validUntil) {
		s.giveBack(key, token, cfg.ttl, time.Time{})
		return nil, fmt.Errorf("%w: permits of %q granted after their validity", ErrUnavailable, key)
	}
	return s.newPermit(ctx, key, token, g, cfg, validUntil)
}

// semWaitError explains why a wait for permits ended: the caller's context
// (the error matches ctx.Err() and its cause), the wait bound, or the wait
// context ending otherwise, with the last attempt's answer. It matches
// ErrNotAcquired.
func semWaitError(ctx, wctx context.Context, key string, last error) error {
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
		errs = append(errs, errWaitElapsed)
	default:
		errs = append(errs, wctx.Err())
		why = wctx.Err().Error()
	}
	msg := fmt.Sprintf("%v: semaphore %q: %s", ErrNotAcquired, key, why)
	if last != nil {
		msg += " (last attempt: " + trimSentinels(last.Error()) + ")"
		errs = append(errs, last)
	}
	return &textError{msg, errs}
}

// permitNotifier is a PermitNotifier as the lease engine's Pacer wants it
// (driver.Notifier).
type permitNotifier struct{ n driver.PermitNotifier }

// Subscribe implements driver.Notifier.
func (p permitNotifier) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return p.n.SubscribePermits(ctx, key)
}
