// Package memstore is an in-memory driver.Mutex for examples, for unit tests
// of code that uses dlock, and as the reference the conformance suite and the
// reliability checks compare real stores against.
//
// It holds locks in one process only, so it protects nothing across
// processes; use a server-backed store (redisstore, redlock, etcdstore) for
// that. It registers no URL scheme, so the CLI cannot open it.
//
// It follows the driver.Mutex rules as the reference: a re-entry never
// shortens a holding's expiry, Extend sets it to the latest ttl, and no
// state is kept for a released or expired key (expired ones are swept as
// the store is used; a holding ended by Break is remembered until it would
// have expired), so its memory follows the locks held, not the keys ever
// locked. Fences come from one counter for the whole store: strictly
// increasing per key with no per-key state; a released key reports fence 0
// in Inspect.
//
// # Capabilities
//
// Model: per-key TTLs of at least 1 ms, in milliseconds, expired on the
// process's clock (the now function given to New). Besides driver.Mutex a
// Store is a driver.Notifier (a channel per subscriber), driver.Transferer,
// driver.Atomic (string resources kept with Set and read with Get, for
// WithRead and Lease.Commit), driver.Inspector, driver.MetaKeeper and
// driver.Breaker (the broken holder is told "taken" until its holding would
// have expired).
// It is also a driver.Semaphore (with driver.PermitNotifier and driver.PermitInspector):
// each holding of permits expires on its own, fences come from the same
// counter, and a key with no live holding keeps nothing, not even its
// limit. And it is a driver.RWMutex (with driver.RWNotifier and
// driver.RWInspector): read and write holdings each with its own expiry,
// fences from the same counter, the writer-waiting mark kept for
// driver.WriterWaitTTL on the process's clock. It is a driver.RateLimiter:
// each key's TAT on the same clock, dropped once it has passed. It is a driver.Idempotency too:
// records keyed by scope and key, fences from the same counter, a completed
// record dropped after its retention (on the same clock). It is not a
// driver.Queuer, BatchExtender, Lister, WaiterCounter or Doctor: the client
// falls back as each of those documents.
//
// # Errors
//
// Every method that takes a ctx returns ctx's error, unwrapped and changing
// nothing, when ctx is already done (Apply refuses a step it cannot perform
// first); otherwise it answers at once. The Mutex methods do not validate
// keys, tokens and ttls (the dlock Client does that before any call); the
// Semaphore, RWMutex, RateLimiter and Idempotency methods do
// (driver.ValidatePermits, driver.ValidateRW, driver.ValidateRate,
// driver.ValidateRecord), before looking at ctx.
// The store never fails for want of a server: its other errors are the
// contract's answers (a *driver.ContendedError, driver.NotHeld, ErrInvalid
// for a step it cannot perform), each documented on its method.
//
// # Where to start
//
// New, then dlock.New; the dlock package's examples all run on this store.
// The repository's README.md ("Writing a store") describes the contract
// this store is the reference for.
package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"example.com/dlock/driver"
)

// Store is an in-memory lock store. The zero value is not usable; call New.
// It is safe for concurrent use.
type Store struct {
	now func() time.Time

	mu      sync.Mutex
	locks   map[string]*entry
	fence   uint64 // the last fence issued, for any key
	sweepAt int    // sweep expired entries when len(locks) reaches it
	subs    subscribers
	data    map[string]string // resources for WithRead and Lease.Commit
	sem     semState          // the Semaphore keys (semaphore.go)
	rw      rwState           // the RWMutex keys (rwmutex.go)
	rate    rateState         // the RateLimiter keys (ratelimit.go)
	idem    idemState         // the idempotency records (idempotency.go)
	broken  map[string]entry  // holdings ended by Break, until they would have expired (break.go)
}

type entry struct {
	token   string
	holds   int
	fence   uint64
	expires time.Time
	meta    string // holder metadata (driver.MetaKeeper)
}

var (
	_ driver.Mutex      = (*Store)(nil)
	_ driver.Notifier   = (*Store)(nil)
	_ driver.Inspector  = (*Store)(nil)
	_ driver.MetaKeeper = (*Store)(nil)
)

// New returns an empty store that reads time from now (time.Now if nil).
func New(now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{
		now:    now,
		locks:  make(map[string]*entry),
		data:   make(map[string]string),
		broken: make(map[string]entry),
	}
}

// live returns the unexpired entry for key, dropping an expired one.
func (s *Store) live(key string) *entry {
	e := s.locks[key]
	if e != nil && !s.now().Before(e.expires) {
		delete(s.locks, key)
		return nil
	}
	return e
}

// Acquire implements driver.Mutex: it makes token the holder of key for
// ttl, or adds a hold if token holds it already (same fence, expiry the
// later of the current one and ttl from now). If another token holds key it
// returns a *driver.ContendedError with that holder's remaining time and
// changes nothing.
func (s *Store) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acquire(key, token, ttl, driver.MetaFrom(ctx))
}

// acquire is Acquire, recording meta with a new holding. Called with s.mu
// held.
func (s *Store) acquire(key, token string, ttl time.Duration, meta string) (driver.Grant, error) {
	e := s.live(key)
	switch {
	case e == nil:
		s.sweep()
		s.fence++
		e = &entry{token: token, fence: s.fence, meta: meta}
		s.locks[key] = e
	case e.token != token:
		return driver.Grant{}, &driver.ContendedError{Remaining: e.expires.Sub(s.now())}
	}
	e.holds++
	if until := s.now().Add(ttl); until.After(e.expires) {
		e.expires = until // a re-entry never shortens the holding
	}
	return driver.Grant{Fence: e.fence, Holds: e.holds, TTL: ttl}, nil
}

// sweep drops expired entries once the map has doubled since the last
// sweep: amortised O(1) per acquisition, and keys locked once and left to
// expire do not pile up. Called with s.mu held.
func (s *Store) sweep() {
	if len(s.locks) < s.sweepAt {
		return
	}
	now := s.now()
	for k, e := range s.locks {
		if !now.Before(e.expires) {
			delete(s.locks, k)
		}
	}
	s.sweepBroken(now)
	s.sweepAt = max(64, 2*len(s.locks))
}

// Retention is 0: the store keeps nothing of a key once it is released or
// its lease has ended (drivertest.StateReporter).
func (s *Store) Retention() time.Duration { return 0 }

// KeyState returns how many entries the store keeps for key: its lock if
// held, its subscriptions if any, the same for the Semaphore, RWMutex and
// RateLimiter keys of that name, and its idempotency records in any scope
// (drivertest.StateReporter). An expired
// lock is dropped here, as on any access. Its only error is ctx's.
func (s *Store) KeyState(ctx context.Context, key string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.subs[key]) + s.semEntries(key) + s.rwEntries(key) + s.rateEntries(key) + s.idemEntries(key)
	if s.live(key) != nil {
		n++
	}
	if s.wasBroken(key, "") {
		n++
	}
	return n, nil
}

// Extend implements driver.Mutex: it sets the expiry of token's holding of
// key to ttl from now, shorter or longer. If token does not hold key it
// changes nothing and returns driver.NotHeld: matching driver.ErrExpired
// when the key is free (or its lease ran out), driver.ErrTaken when another
// token holds it.
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.owned(key, token)
	if err != nil {
		return driver.Grant{}, err
	}
	e.expires = s.now().Add(ttl)
	return driver.Grant{Fence: e.fence, Holds: e.holds, TTL: ttl}, nil
}

// Release implements driver.Mutex: it removes one hold of token on key,
// and on the last one frees key and wakes its subscribers. If token does not
// hold key it changes nothing and returns driver.NotHeld, as Extend.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.release(key, token)
}

// release is Release. Called with s.mu held.
func (s *Store) release(key, token string) error {
	e, err := s.owned(key, token)
	if err != nil {
		return err
	}
	if e.holds--; e.holds > 0 {
		return nil
	}
	delete(s.locks, key)
	s.subs.notify(key)
	return nil
}

func (s *Store) owned(key, token string) (*entry, error) {
	e := s.live(key)
	switch {
	case e == nil && s.wasBroken(key, token):
		return nil, driver.NotHeld(true)
	case e == nil:
		return nil, fmt.Errorf("%w: %w", driver.ErrNotHeld, driver.ErrExpired)
	case e.token != token:
		return nil, fmt.Errorf("%w: %w", driver.ErrNotHeld, driver.ErrTaken)
	}
	return e, nil
}

// Subscribe implements driver.Notifier: every later final Release of key
// sends a value on the channel (coalesced: it holds one). An expiry or a
// Transfer sends nothing. Its only error is ctx's; cancel may be called
// more than once.
func (s *Store) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	ch, cancel := s.subscribe(&s.subs, key)
	return ch, cancel, nil
}

// KeepsMeta implements driver.MetaKeeper: a holding keeps the metadata of
// the Acquire that started it, through re-entries, extensions and
// transfers.
func (s *Store) KeepsMeta() bool { return true }

// Inspect implements driver.Inspector: the holder's token, hold count,
// fence, remaining time and metadata, or Held false and Fence 0 for a free key. Its
// only error is ctx's.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := ctx.Err(); err != nil {
		return driver.Info{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var info driver.Info
	if e := s.live(key); e != nil {
		info.Held, info.Token, info.Holds, info.Fence = true, e.token, e.holds, e.fence
		info.Meta = e.meta
		info.Remaining = e.expires.Sub(s.now())
	}
	return info, nil
}

// Model implements driver.Mutex: per-key TTLs of at least a millisecond,
// kept on this process's clock (the now function given to New), which
// counts as the server's clock since every holder shares it.
func (s *Store) Model() driver.Model {
	return driver.Model{MinTTL: time.Millisecond, Granularity: time.Millisecond, ServerClock: true}
}
