package drivertest_test

import (
	"context"
	"strings"
	"sync"
	"time"

	"example.com/dlock/driver"
)

// refStore is an in-memory store with every capability the suite checks
// that memstore lacks (Queuer, BatchExtender, Lister, WaiterCounter), so
// that those cases run here against something that passes them, and with
// one deliberate bug per mutation, for the mutants that must fail.
type refStore struct {
	mut mutation

	mu      sync.Mutex
	locks   map[string]*refLock
	fence   uint64
	subs    map[string]map[chan struct{}]struct{}
	queues  map[string][]string // queued tokens per key, head first
	changed chan struct{}       // closed (and replaced) when a queued waiter may go
	foreign map[string]bool     // keys holding a value that is not a lock
	broken  map[string]string   // the token whose holding Break ended last, per key

	pmu     sync.Mutex
	resumed chan struct{} // not nil while paused (Harness.Pause); closed on resume
}

type refLock struct {
	token   string
	holds   int
	fence   uint64
	expires time.Time
}

// mutation is the bug a mutant store carries.
type mutation string

const (
	correct              mutation = ""
	noOwnerCheck         mutation = "no-owner-check"         // Extend and Release by anyone work
	acquireIgnoresHolder mutation = "acquire-ignores-holder" // Acquire takes a held key
	noExpiry             mutation = "no-expiry"              // leases never end
	fenceStuck           mutation = "fence-stuck"            // every holding gets fence 1
	extendRecreates      mutation = "extend-recreates"       // Extend of a free key takes it
	reentryShortens      mutation = "reentry-shortens"       // a re-entry sets the expiry to its ttl
	spuriousNotify       mutation = "spurious-notify"        // acquisitions notify subscribers
	queueLIFO            mutation = "queue-lifo"             // the last waiter queued goes first
	sessionNoRenew       mutation = "session-no-renew"       // Extend does not renew the session
	sessionOutlivesKill  mutation = "session-outlives-kill"  // a killed client's holdings never end
	answersWhenDown      mutation = "answers-when-down"      // a paused store answers "not held"
	releaseAllHolds      mutation = "release-all-holds"      // Release frees the key whatever its hold count
	extendHalf           mutation = "extend-half"            // Extend sets half the expiry asked for
	releaseNoop          mutation = "release-noop"           // Release answers success and frees nothing
	releaseIgnoresCtx    mutation = "release-ignores-ctx"    // Release with an ended context releases anyway
	sessionForgetsEnded  mutation = "session-forgets-ended"  // an ended Release forgets the holding in the client
	breakResetsFence     mutation = "break-resets-fence"     // Break restarts the fence counter
)

func newRef(m mutation) *refStore {
	return &refStore{
		mut: m, locks: map[string]*refLock{}, subs: map[string]map[chan struct{}]struct{}{},
		queues: map[string][]string{}, changed: make(chan struct{}), foreign: map[string]bool{},
		broken: map[string]string{},
	}
}

var (
	_ driver.Queuer        = (*refStore)(nil)
	_ driver.BatchExtender = (*refStore)(nil)
	_ driver.Lister        = (*refStore)(nil)
	_ driver.WaiterCounter = (*refStore)(nil)
	_ driver.Notifier      = (*refStore)(nil)
	_ driver.Inspector     = (*refStore)(nil)
)

func (r *refStore) Model() driver.Model {
	return driver.Model{MinTTL: time.Millisecond, Granularity: time.Millisecond, ServerClock: true}
}

// live returns key's unexpired lock. Called with r.mu held.
func (r *refStore) live(key string) *refLock {
	l := r.locks[key]
	if l != nil && r.mut != noExpiry && !time.Now().Before(l.expires) {
		delete(r.locks, key)
		return nil
	}
	return l
}

func (r *refStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := r.reach(ctx); err != nil {
		return driver.Grant{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acquire(key, token, ttl)
}

func (r *refStore) acquire(key, token string, ttl time.Duration) (driver.Grant, error) {
	l := r.live(key)
	switch {
	case l == nil || (l.token != token && r.mut == acquireIgnoresHolder):
		r.fence++
		l = &refLock{token: token, fence: r.fence}
		if r.mut == fenceStuck {
			l.fence = 1
		}
		r.locks[key] = l
		if r.mut == spuriousNotify {
			r.notify(key)
		}
	case l.token != token:
		return driver.Grant{}, &driver.ContendedError{Remaining: time.Until(l.expires)}
	}
	l.holds++
	if until := time.Now().Add(ttl); until.After(l.expires) || r.mut == reentryShortens {
		l.expires = until
	}
	return driver.Grant{Fence: l.fence, Holds: l.holds, TTL: ttl}, nil
}

// owned returns the lock token holds on key. Called with r.mu held.
func (r *refStore) owned(key, token string) (*refLock, error) {
	l := r.live(key)
	switch {
	case l == nil && r.broken[key] == token:
		return nil, driver.NotHeld(true) // its holding was broken (refbreak_test.go)
	case l == nil:
		return nil, driver.NotHeld(false)
	case l.token != token && r.mut != noOwnerCheck:
		return nil, driver.NotHeld(true)
	}
	return l, nil
}

func (r *refStore) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := r.reach(ctx); err != nil {
		return driver.Grant{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.extend(key, token, ttl)
}

func (r *refStore) extend(key, token string, ttl time.Duration) (driver.Grant, error) {
	if r.mut == extendRecreates && r.live(key) == nil {
		return r.acquire(key, token, ttl)
	}
	l, err := r.owned(key, token)
	if err != nil {
		return driver.Grant{}, err
	}
	if r.mut == extendHalf {
		ttl /= 2
	}
	l.expires = time.Now().Add(ttl)
	if r.mut == extendHalf {
		ttl *= 2 // and says it set what was asked
	}
	return driver.Grant{Fence: l.fence, Holds: l.holds, TTL: ttl}, nil
}

func (r *refStore) Release(ctx context.Context, key, token string) error {
	if err := r.reach(ctx); err != nil && r.mut != releaseIgnoresCtx {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	l, err := r.owned(key, token)
	if err != nil {
		return err
	}
	if r.mut == releaseNoop {
		return nil
	}
	if l.holds--; l.holds > 0 && r.mut != releaseAllHolds {
		return nil
	}
	delete(r.locks, key)
	r.notify(key)
	return nil
}

// notify wakes key's subscribers and queued waiters. Called with r.mu held.
func (r *refStore) notify(key string) {
	for ch := range r.subs[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *refStore) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.subs[key] == nil {
		r.subs[key] = map[chan struct{}]struct{}{}
	}
	r.subs[key][ch] = struct{}{}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if delete(r.subs[key], ch); len(r.subs[key]) == 0 {
				delete(r.subs, key)
			}
		})
	}, nil
}

func (r *refStore) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	res := make([]driver.ExtendResult, len(reqs))
	for i, q := range reqs {
		res[i].Grant, res[i].Err = r.Extend(ctx, q.Key, q.Token, q.TTL)
	}
	return res
}

func (r *refStore) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := ctx.Err(); err != nil {
		return driver.Info{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.info(key), nil
}

// info is key's state. Called with r.mu held.
func (r *refStore) info(key string) driver.Info {
	l := r.live(key)
	if l == nil {
		return driver.Info{}
	}
	return driver.Info{Held: true, Token: l.token, Holds: l.holds, Fence: l.fence, Remaining: time.Until(l.expires)}
}

func (r *refStore) List(ctx context.Context, prefix string, fn func(string, driver.Info) bool) error {
	r.mu.Lock()
	var keys []string
	for k := range r.locks {
		if strings.HasPrefix(k, prefix) && !r.foreign[k] {
			keys = append(keys, k)
		}
	}
	r.mu.Unlock()
	for _, k := range keys {
		info, err := r.Inspect(ctx, k)
		if err != nil {
			return err
		}
		if info.Held && !fn(k, info) {
			return nil
		}
	}
	return nil
}

func (r *refStore) Waiters(ctx context.Context, key string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.subs[key]) + len(r.queues[key]), nil
}

// Retention and KeyState implement drivertest.StateReporter.
func (r *refStore) Retention() time.Duration { return 0 }

func (r *refStore) KeyState(ctx context.Context, key string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.subs[key]) + len(r.queues[key])
	if r.live(key) != nil {
		n++
	}
	return n, ctx.Err()
}

// putForeign stores a value that is not a lock at key (Harness.Foreign).
func (r *refStore) putForeign(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.foreign[key] = true
	r.locks[key] = &refLock{token: "not a lock", holds: 1, expires: time.Now().Add(time.Hour)}
}

// pause makes the store unavailable until the returned function is called:
// Acquire, Extend and Release wait for their context to end.
func (r *refStore) pause() (resume func()) {
	ch := make(chan struct{})
	r.pmu.Lock()
	r.resumed = ch
	r.pmu.Unlock()
	return func() {
		r.pmu.Lock()
		r.resumed = nil
		r.pmu.Unlock()
		close(ch)
	}
}

// reach is the way to the store: it returns ctx's error, or while paused
// waits until the store resumes or ctx ends.
func (r *refStore) reach(ctx context.Context) error {
	r.pmu.Lock()
	ch := r.resumed
	r.pmu.Unlock()
	if ch != nil && r.mut == answersWhenDown {
		return driver.NotHeld(false)
	}
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
	return ctx.Err()
}
