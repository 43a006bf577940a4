package dlock

import (
	"context"
	"errors"
	"fmt"
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
	store driver.RWMutex
	famCore
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
// WithTTL, WithAutoRenew, WithWait, WithBackoff, WithOnRetry, WithClock and
// WithObserver apply as they do to a Client (default: a DefaultLease lease,
// renewed); WithRead does not apply. It returns an error matching
// ErrInvalid, before any I/O, if store is nil or an option is out of range.
func NewRWLocks(store driver.RWMutex, opts ...Option) (*RWLocks, error) {
	if store == nil {
		return nil, invalidf("nil store")
	}
	l := &RWLocks{store: store}
	if err := l.init("read-write lock", errRWClosed, rwStore{store}, opts); err != nil {
		return nil, err
	}
	return l, nil
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
	_, h, err := l.lock(ctx, callRLock, key, driver.RWRead, false, opts)
	return h, err
}

// Lock takes the write holding of key, waiting until no one holds it; while
// it waits, readers that arrive after it are kept out (writer preference),
// so it gets in once the readers ahead of it leave. A ctx that carries a
// read holding of key (RDo's) returns ErrUpgrade at once. Otherwise it
// behaves as RLock. A writer that gives up (ctx, wait bound) may keep new
// readers out for up to driver.WriterWaitTTL more.
func (l *RWLocks) Lock(ctx context.Context, key string, opts ...Option) (*RWHolding, error) {
	_, h, err := l.lock(ctx, callLock, key, driver.RWWrite, false, opts)
	return h, err
}

// TryRLock makes one attempt to take a read holding of key and never
// waits: if a writer holds key or waits for it, it returns a nil holding
// and a *driver.RWTakenError (matching ErrNotAcquired). Other failures are
// as for RLock.
func (l *RWLocks) TryRLock(ctx context.Context, key string, opts ...Option) (*RWHolding, error) {
	_, h, err := l.lock(ctx, callTryRLock, key, driver.RWRead, true, opts)
	return h, err
}

// TryLock makes one attempt to take the write holding of key and never
// waits: if key is held it returns a nil holding and a *driver.RWTakenError
// (matching ErrNotAcquired), leaving a writer-waiting mark for
// driver.WriterWaitTTL. Other failures are as for Lock.
func (l *RWLocks) TryLock(ctx context.Context, key string, opts ...Option) (*RWHolding, error) {
	_, h, err := l.lock(ctx, callTryLock, key, driver.RWWrite, true, opts)
	return h, err
}

// lock takes a holding of key in mode (one attempt if try) for the call
// named name, and returns the call's context (famAcquire).
func (l *RWLocks) lock(ctx context.Context, name, key string, mode driver.RWMode, try bool, opts []Option) (context.Context, *RWHolding, error) {
	cfg, err := l.callConfig(ctx, key, mode, opts)
	if err != nil {
		return ctx, nil, err
	}
	if try {
		cfg.wait = 0
	}
	return famAcquire(&l.famCore, ctx, name, key, cfg, rwKind(mode), famWait[*RWHolding]{
		attempt: func(wctx context.Context, token string) (*RWHolding, error) {
			return l.attempt(wctx, key, token, mode, cfg)
		},
		refusal: func(err error) (bool, time.Duration) { return rwRefusal(mode, err) },
	})
}

// callConfig checks a call's arguments before any I/O and returns its
// configuration.
func (l *RWLocks) callConfig(ctx context.Context, key string, mode driver.RWMode, opts []Option) (config, error) {
	cfg, err := l.famCore.callConfig(ctx, opts)
	if err != nil {
		return cfg, err
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

// rwRefusal says whether an attempt's err is a refusal (key held, or a
// writer waiting), and for how long at most the wait pauses then: the
// store's Remaining, and for a writer never more than writerRetry, so that
// its next attempt renews its writer-waiting mark before the mark ends.
func rwRefusal(mode driver.RWMode, err error) (bool, time.Duration) {
	var taken *driver.RWTakenError
	contended := errors.As(err, &taken)
	remaining := time.Duration(-1)
	if contended {
		remaining = taken.Remaining
	}
	if mode == driver.RWWrite && (remaining < 0 || remaining > writerRetry) {
		remaining = writerRetry
	}
	return contended, remaining
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

// rwStore is an RWMutex as the shared machinery calls it (famStore).
type rwStore struct{ driver.RWMutex }

func (s rwStore) release(ctx context.Context, key, token string) error {
	return s.ReleaseRW(ctx, key, token)
}

func (s rwStore) extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := s.ExtendRW(ctx, key, token, ttl)
	return driver.Grant{Fence: g.Fence, Holds: 1, TTL: g.TTL}, err
}

// extendBatch implements famBatcher with the store's RWBatchExtender, if
// it has one.
func (s rwStore) extendBatch() func(context.Context, []driver.ExtendRequest) []driver.ExtendResult {
	if b, ok := driver.As[driver.RWBatchExtender](s.RWMutex); ok {
		return b.ExtendRWBatch
	}
	return nil
}

func (s rwStore) notifier() driver.Notifier {
	if n, ok := driver.As[driver.RWNotifier](s.RWMutex); ok {
		return rwNotifier{n}
	}
	return nil
}

// rwNotifier is an RWNotifier as the lease engine's Pacer wants it
// (driver.Notifier).
type rwNotifier struct{ n driver.RWNotifier }

// Subscribe implements driver.Notifier.
func (r rwNotifier) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return r.n.SubscribeRW(ctx, key)
}
