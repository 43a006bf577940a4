package dlock

import (
	"context"
	"errors"
	"fmt"
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
	store driver.Semaphore
	famCore
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
	s := &Semaphores{store: store}
	if err := s.init("semaphore", errSemClosed, semStore{store}, opts); err != nil {
		return nil, err
	}
	return s, nil
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
	return s.observedAcquire(ctx, callAcquire, key, limit, permits, cfg)
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
	return s.observedAcquire(ctx, callTryAcquire, key, limit, permits, cfg)
}

// observedAcquire waits for permits as Acquire does, with its wait's events
// if cfg has an Observer.
func (s *Semaphores) observedAcquire(ctx context.Context, name, key string, limit, permits int, cfg config) (*Permit, error) {
	_, p, err := famAcquire(&s.famCore, ctx, name, key, cfg, KindPermit, famWait[*Permit]{
		attempt: func(wctx context.Context, token string) (*Permit, error) {
			return s.attempt(wctx, key, token, limit, permits, cfg)
		},
		refusal: permitsRefusal,
	})
	return p, err
}

// callConfig checks a call's arguments before any I/O and returns its
// configuration.
func (s *Semaphores) callConfig(ctx context.Context, key string, limit, permits int, opts []Option) (config, error) {
	cfg, err := s.famCore.callConfig(ctx, opts)
	if err != nil {
		return cfg, err
	}
	return cfg, driver.ValidatePermits(key, limit, permits, cfg.ttl)
}

// errSemClosed is what calls on a closed Semaphores fail with.
var errSemClosed error = &textError{"dlock: semaphores closed", []error{ErrInvalid}}

// permitsRefusal says whether an attempt's err is a full semaphore, and
// for how long at most the wait pauses then: the store's Remaining.
func permitsRefusal(err error) (bool, time.Duration) {
	var pt *driver.PermitsTakenError
	if errors.As(err, &pt) {
		return true, pt.Remaining
	}
	return false, -1
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
		s.giveBack(key, token, cfg.ttl, time.Time{}, nil)
		return nil, fmt.Errorf("%w: permits of %q granted after their validity", ErrUnavailable, key)
	}
	return s.newPermit(ctx, key, token, g, cfg, validUntil)
}

// semStore is a Semaphore as the shared machinery calls it (famStore).
type semStore struct{ driver.Semaphore }

func (s semStore) release(ctx context.Context, key, token string) error {
	return s.ReleasePermits(ctx, key, token)
}

func (s semStore) extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := s.ExtendPermits(ctx, key, token, ttl)
	return driver.Grant{Fence: g.Fence, Holds: g.Permits, TTL: g.TTL}, err
}

// extendBatch implements famBatcher with the store's
// PermitBatchExtender, if it has one.
func (s semStore) extendBatch() func(context.Context, []driver.ExtendRequest) []driver.ExtendResult {
	if b, ok := driver.As[driver.PermitBatchExtender](s.Semaphore); ok {
		return b.ExtendPermitsBatch
	}
	return nil
}

func (s semStore) notifier() driver.Notifier {
	if pn, ok := driver.As[driver.PermitNotifier](s.Semaphore); ok {
		return permitNotifier{pn}
	}
	return nil
}

// permitNotifier is a PermitNotifier as the lease engine's Pacer wants it
// (driver.Notifier).
type permitNotifier struct{ n driver.PermitNotifier }

// Subscribe implements driver.Notifier.
func (p permitNotifier) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return p.n.SubscribePermits(ctx, key)
}

// Close releases every permit still held (their Err then matches
// ErrNotHeld), stops their renewal, ends the waits of Acquire (which then
// return ErrNotAcquired and ErrInvalid) and waits for the background
// give-backs, cancelling them if ctx ends first. Later calls return
// ErrInvalid. It returns the first release error, or ctx's; what was not
// confirmed expires at the end of its lease. It does not close the store.
// Closing twice returns nil.
func (s *Semaphores) Close(ctx context.Context) error { return s.close(ctx) }
