package memstore

import (
	"context"
	"time"

	"example.com/dlock/driver"
)

// The RWMutex keys: each its live holdings (all read, or one write), each
// with a fence from the store's one counter and an expiry of its own, and
// the writer-waiting mark (the token of the writer that set it last and its
// expiry). A key with no live holding and no live mark has no entry.

var (
	_ driver.RWMutex     = (*Store)(nil)
	_ driver.RWNotifier  = (*Store)(nil)
	_ driver.RWInspector = (*Store)(nil)
)

// rwState is the store's RWMutex state.
type rwState = keyState[*rwKey]

type rwKey struct {
	mode     driver.RWMode // of every holding; 0 when there is none
	holders  map[string]*rwHolding
	waiter   string    // the token of the writer that set the mark last
	waitedTo time.Time // the mark's expiry; zero: no mark
}

type rwHolding struct {
	fence   uint64
	expires time.Time
}

func (h *rwHolding) expiry() time.Time { return h.expires }

// rwLive returns key's entry with its expired holdings and mark dropped,
// or nil (dropping the entry) when nothing is left. Called with s.mu held.
func (s *Store) rwLive(key string) *rwKey {
	e := s.rw.keys[key]
	if e == nil {
		return nil
	}
	now := s.now()
	for tok, h := range e.holders {
		if !now.Before(h.expires) {
			delete(e.holders, tok)
		}
	}
	if len(e.holders) == 0 {
		e.mode = 0
	}
	if !e.waitedTo.IsZero() && !now.Before(e.waitedTo) {
		e.waiter, e.waitedTo = "", time.Time{}
	}
	if len(e.holders) == 0 && e.waitedTo.IsZero() {
		delete(s.rw.keys, key)
		return nil
	}
	return e
}

// rwEntry returns key's live entry, making one (and sweeping the map once
// it has doubled since the last sweep) if there is none. Called with s.mu
// held.
func (s *Store) rwEntry(key string) *rwKey {
	if e := s.rwLive(key); e != nil {
		return e
	}
	sweepKeys(s.rw.keys, &s.rw.sweepAt, func(k string) { s.rwLive(k) })
	if s.rw.keys == nil {
		s.rw.keys = make(map[string]*rwKey)
	}
	e := &rwKey{holders: make(map[string]*rwHolding)}
	s.rw.keys[key] = e
	return e
}

// grant describes token's holding h of e.
func (e *rwKey) grant(h *rwHolding, ttl time.Duration) driver.RWGrant {
	g := driver.RWGrant{Mode: e.mode, Fence: h.fence, TTL: ttl}
	if e.mode == driver.RWRead {
		g.Readers = len(e.holders)
	}
	return g
}

// taken is the refusal of a call that e's holdings (or, with markOnly,
// its mark alone) keep out: Remaining is the earliest holding's expiry, or
// the mark's.
func (e *rwKey) taken(now time.Time, markOnly bool) *driver.RWTakenError {
	err := &driver.RWTakenError{Held: e.mode, WriterWaiting: !e.waitedTo.IsZero()}
	if e.mode == driver.RWRead {
		err.Readers = len(e.holders)
	}
	first := e.waitedTo
	if !markOnly {
		first = earliest(e.holders)
	}
	err.Remaining = first.Sub(now)
	return err
}

// rwStart validates a call and checks ctx, before taking the lock.
func rwStart(ctx context.Context, key string, ttl time.Duration) error {
	return start(ctx, driver.ValidateRW(key, ttl))
}

// AcquireRead implements driver.RWMutex: token gets a read holding of key
// for ttl unless a writer holds key or a writer-waiting mark is live (a
// *driver.RWTakenError, changing nothing). A reader's call is a re-entry
// (same fence; expiry the later of the current one and ttl from now), the
// writer's a downgrade in place (the same, now a read holding; subscribers
// wake). Bad arguments match driver.ErrInvalid; a done ctx returns its
// error.
func (s *Store) AcquireRead(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if err := rwStart(ctx, key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, now := s.rwEntry(key), s.now()
	if h := e.holders[token]; h != nil {
		if e.mode == driver.RWWrite {
			e.mode = driver.RWRead
			s.rw.subs.notify(key)
		}
		h.expires = later(h.expires, now.Add(ttl))
		return e.grant(h, ttl), nil
	}
	switch {
	case e.mode == driver.RWWrite:
		return driver.RWGrant{}, e.taken(now, false)
	case !e.waitedTo.IsZero():
		return driver.RWGrant{}, e.taken(now, true)
	}
	return s.rwHold(e, token, driver.RWRead, now.Add(ttl), ttl), nil
}

// AcquireWrite implements driver.RWMutex: token gets the write holding of
// key for ttl if nothing holds key; otherwise it returns a
// *driver.RWTakenError and sets the writer-waiting mark to token for
// driver.WriterWaitTTL. The writer's call is a re-entry; a reader's returns
// driver.ErrUpgrade, changing nothing. Bad arguments match
// driver.ErrInvalid; a done ctx returns its error.
func (s *Store) AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if err := rwStart(ctx, key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, now := s.rwEntry(key), s.now()
	if h := e.holders[token]; h != nil {
		if e.mode == driver.RWRead {
			return driver.RWGrant{}, driver.ErrUpgrade
		}
		h.expires = later(h.expires, now.Add(ttl))
		return e.grant(h, ttl), nil
	}
	if len(e.holders) > 0 {
		e.waiter, e.waitedTo = token, now.Add(driver.WriterWaitTTL)
		return driver.RWGrant{}, e.taken(now, false)
	}
	if e.waiter == token {
		e.waiter, e.waitedTo = "", time.Time{}
	}
	return s.rwHold(e, token, driver.RWWrite, now.Add(ttl), ttl), nil
}

// rwHold records a new holding with the next fence. Called with s.mu held.
func (s *Store) rwHold(e *rwKey, token string, mode driver.RWMode, until time.Time, ttl time.Duration) driver.RWGrant {
	s.fence++
	h := &rwHolding{fence: s.fence, expires: until}
	e.mode, e.holders[token] = mode, h
	return e.grant(h, ttl)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ExtendRW implements driver.RWMutex: token's holding of key expires ttl
// from now, shorter or longer; other holdings are untouched. If token holds
// nothing of key it changes nothing and returns driver.NotHeld
// (ErrExpired). Bad arguments match driver.ErrInvalid; a done ctx returns
// its error.
func (s *Store) ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if err := rwStart(ctx, key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.rwLive(key)
	if e == nil || e.holders[token] == nil {
		return driver.RWGrant{}, driver.NotHeld(false)
	}
	h := e.holders[token]
	h.expires = s.now().Add(ttl)
	return e.grant(h, ttl), nil
}

// ReleaseRW implements driver.RWMutex: token's holding of key ends and
// key's subscribers wake. If token holds nothing it changes nothing and
// returns driver.NotHeld (ErrExpired). Bad keys match driver.ErrInvalid; a
// done ctx returns its error.
func (s *Store) ReleaseRW(ctx context.Context, key, token string) error {
	if err := rwStart(ctx, key, time.Millisecond); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.rwLive(key)
	if e == nil || e.holders[token] == nil {
		return driver.NotHeld(false)
	}
	delete(e.holders, token)
	s.rwLive(key)
	s.rw.subs.notify(key)
	return nil
}

// SubscribeRW implements driver.RWNotifier: every later ReleaseRW of key,
// and every downgrade, sends a value (coalesced: the channel holds one); an
// expiry sends nothing. Its only errors are a bad key's and ctx's; cancel
// may be called more than once.
func (s *Store) SubscribeRW(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := rwStart(ctx, key, time.Millisecond); err != nil {
		return nil, nil, err
	}
	ch, cancel := s.subscribe(&s.rw.subs, key)
	return ch, cancel, nil
}

// InspectRW implements driver.RWInspector. Its only errors are a bad key's
// and ctx's.
func (s *Store) InspectRW(ctx context.Context, key string) (driver.RWInfo, error) {
	if err := rwStart(ctx, key, time.Millisecond); err != nil {
		return driver.RWInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var info driver.RWInfo
	if e := s.rwLive(key); e != nil {
		now := s.now()
		info.Mode = e.mode
		for tok, h := range e.holders {
			info.Holders = append(info.Holders, driver.RWHolder{Token: tok, Mode: e.mode, Fence: h.fence, Remaining: h.expires.Sub(now)})
		}
		if !e.waitedTo.IsZero() {
			info.WriterWaiting = e.waitedTo.Sub(now)
		}
	}
	return info, nil
}

// rwEntries is how many entries the store keeps for the RWMutex key key:
// its holdings, its mark and its subscriptions. Called with s.mu held.
func (s *Store) rwEntries(key string) int {
	n := len(s.rw.subs[key])
	if e := s.rwLive(key); e != nil {
		n += len(e.holders)
		if !e.waitedTo.IsZero() {
			n++
		}
	}
	return n
}
