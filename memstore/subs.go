package memstore

import (
	"context"
	"sync"
	"time"
)

// keyState is the store's state of the semaphore or read-write lock keys:
// their entries (E) and subscribers. Its maps are made on first use.
type keyState[E any] struct {
	keys    map[string]E
	subs    subscribers
	sweepAt int // sweep expired keys when len(keys) reaches it
}

// subscribers are the channels that releases of a key wake, by key: one
// set for locks, semaphores and read-write locks each. Guarded by the
// store's mutex; the map is made on first use.
type subscribers map[string]map[chan struct{}]struct{}

// notify wakes key's subscribers, coalesced: a channel holds one value.
// Called with s.mu held.
func (m subscribers) notify(key string) {
	for ch := range m[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// subscribe adds a channel to subs for key and returns it with its
// cancel, which may be called more than once. It takes s.mu.
func (s *Store) subscribe(subs *subscribers, key string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if *subs == nil {
		*subs = make(subscribers)
	}
	if (*subs)[key] == nil {
		(*subs)[key] = make(map[chan struct{}]struct{})
	}
	(*subs)[key][ch] = struct{}{}
	s.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if delete((*subs)[key], ch); len((*subs)[key]) == 0 {
				delete(*subs, key)
			}
		})
	}
}

// start is the check of a call before the store's mutex: the arguments'
// error (invalid), else ctx's.
func start(ctx context.Context, invalid error) error {
	if invalid != nil {
		return invalid
	}
	return ctx.Err()
}

// sweepKeys makes live drop the expired entries of keys once the map has
// reached *sweepAt (doubled since the last sweep), as sweep does for locks.
// Called with s.mu held.
func sweepKeys[E any](keys map[string]E, sweepAt *int, live func(key string)) {
	if len(keys) < *sweepAt {
		return
	}
	for k := range keys {
		live(k)
	}
	*sweepAt = max(64, 2*len(keys))
}

// expiring is a holding of a semaphore or read-write lock key, as the
// earliest expiry sees it.
type expiring interface{ expiry() time.Time }

// earliest returns the expiry of the first of holders to end (zero if
// none).
func earliest[H expiring](holders map[string]H) time.Time {
	var t time.Time
	for _, h := range holders {
		if e := h.expiry(); t.IsZero() || e.Before(t) {
			t = e
		}
	}
	return t
}
