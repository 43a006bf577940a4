package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

var (
	//go:embed fair.lua
	fairLua string
	//go:embed fair_leave.lua
	fairLeaveLua string
	//go:embed fair_waiters.lua
	fairWaitersSrc string

	// fair.lua runs in front of acquire.lua, whose optional resource key
	// moves to KEYS[4] and which reuses fair.lua's TIME: the default
	// scripts stay as they are.
	fairAcquireSrc    = lockLua + fairLua + fairTail(acquireLua)
	fairLeaveSrc      = lockLua + fairLeaveLua
	fairAcquireScript = redis.NewScript(fairAcquireSrc)
	fairLeaveScript   = redis.NewScript(fairLeaveSrc)
	fairWaitersScript = redis.NewScript(fairWaitersSrc)
	hotFairAcquire    = newHotScript(fairAcquireScript, fairAcquireSrc)
)

// fairTail is acquire.lua as the tail of fair.lua. It panics if acquire.lua
// no longer has what it replaces, so that a change there cannot silently
// break the fair script.
func fairTail(src string) string {
	const clock = "local t = redis.call('TIME')"
	if strings.Count(src, clock) != 1 || !strings.Contains(src, "KEYS[2]") || strings.Contains(src, "KEYS[4]") {
		panic("redisstore: acquire.lua changed: update fairTail")
	}
	src = strings.Replace(src, clock, "local t = tq", 1)
	return strings.ReplaceAll(src, "KEYS[2]", "KEYS[4]")
}

// DefaultWaiterLease is the waiter lease of a FairStore when
// Options.WaiterLease is 0; MinWaiterLease is the least one allowed.
const (
	DefaultWaiterLease = 3 * time.Second
	MinWaiterLease     = 100 * time.Millisecond
)

// FairStore is the fair lock on Redis: a driver.Mutex and driver.Queuer
// whose waiters are served in the order they joined its queue, across
// processes, on the server's clock. It shares the lock layout, fences,
// resent-call safety and release notifications of Store (a FairStore and a
// Store on the same keys exclude each other, but only FairStore callers
// respect the queue).
//
// The queue of lock KEY is a list and a sorted set under the key's hash tag
// (QueueKeys), so a Cluster keeps them in the lock's slot. Each waiter holds
// a waiter lease (Options.WaiterLease, 3 s by default) on the server's
// clock, renewed every third of it while it waits: a waiter whose process
// died is evicted at most one waiter lease after its last renewal, by its
// own deadline, whatever its place; several dead waiters are evicted
// together, never one after the other.
//
// Acquire (TryLock) takes a free lock only if nobody queues (or the caller
// heads the queue); otherwise it changes nothing and returns a
// *driver.ContendedError, with Remaining -1 when the lock is free but
// others queue. A holder's re-entry is never refused.
//
// A FairStore is not a driver.Transferer, driver.Atomic or driver.Semaphore:
// a local handoff or a WithRead acquisition would pass the queue by, so
// dlock.Client releases and the next waiter acquires. Nor is it a
// driver.Notifier: its waiters wait in the queue (AcquireQueued), which
// subscribes to the release channel itself.
type FairStore struct {
	s       *Store
	lease   time.Duration
	leaseMS any
	acquire hotScript // hotFairAcquire; a mutant in tests
}

var (
	_ driver.Mutex         = (*FairStore)(nil)
	_ driver.Queuer        = (*FairStore)(nil)
	_ driver.BatchExtender = (*FairStore)(nil)
	_ driver.Inspector     = (*FairStore)(nil)
	_ driver.Lister        = (*FairStore)(nil)
	_ driver.WaiterCounter = (*FairStore)(nil)
	_ driver.Doctor        = (*FairStore)(nil)
)

// NewFair returns a fair store that uses client, with opts as New (Fair is
// implied). It returns an error matching driver.ErrInvalid where New does,
// and for a WaiterLease below MinWaiterLease (other than 0). It makes no
// network call.
func NewFair(client redis.UniversalClient, opts *Options) (*FairStore, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Fair = false
	switch {
	case o.WaiterLease == 0:
		o.WaiterLease = DefaultWaiterLease
	case o.WaiterLease < MinWaiterLease:
		return nil, fmt.Errorf("%w: WaiterLease %v below %v", driver.ErrInvalid, o.WaiterLease, MinWaiterLease)
	}
	s, err := New(client, &o)
	if err != nil {
		return nil, err
	}
	s.fair = true
	return &FairStore{s: s, lease: o.WaiterLease, leaseMS: ms(o.WaiterLease), acquire: hotFairAcquire}, nil
}

// WaiterLease returns the store's waiter lease (Options.WaiterLease).
func (f *FairStore) WaiterLease() time.Duration { return f.lease }

// Retention is Store.Retention.
func (f *FairStore) Retention() time.Duration { return f.s.retention }

// Keys is Store.Keys.
func (f *FairStore) Keys(key string) (lock, fence string) { return f.s.Keys(key) }

// QueueKeys returns the Redis keys of lock key's queue: the list of waiting
// tokens in order, and the sorted set of their waiter lease deadlines
// (server milliseconds). Both vanish with the last waiter lease. It does no
// I/O and does not validate key.
func (f *FairStore) QueueKeys(key string) (queue, waiters string) {
	lock := f.s.lock(key)
	return lock + ":queue", lock + ":waiters"
}

// Model is Store.Model.
func (f *FairStore) Model() driver.Model { return f.s.Model() }

// Close is Store.Close.
func (f *FairStore) Close() error { return f.s.Close() }

// Acquire implements driver.Mutex in one script call: as Store.Acquire,
// except that a free lock is refused (a *driver.ContendedError with
// Remaining -1, changing nothing) while other tokens queue for it, unless
// token heads the queue.
func (f *FairStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := checkKey(key); err != nil {
		return driver.Grant{}, err
	}
	return f.try(ctx, key, token, ttl, callID(), false)
}

// try runs fair.lua once with call id call, joining the queue (or renewing
// token's place) if join and the lock is not granted.
func (f *FairStore) try(ctx context.Context, key, token string, ttl time.Duration, call any, join bool) (driver.Grant, error) {
	queue, waiters := f.QueueKeys(key)
	j := 0
	if join {
		j = 1
	}
	cmd := f.s.run(ctx, f.acquire, []any{nil, nil, 3, f.s.lock(key), queue, waiters,
		token, ttlArg(ttl), call, f.leaseMS, j, f.s.channel(key)})
	if n, ok := cmd.Val().(int64); ok && cmd.Err() == nil && n > 0 {
		return driver.Grant{Fence: uint64(n), Holds: 1, TTL: ttl}, nil
	}
	var buf [3]int64
	v, err := ints(cmd, buf[:0])
	switch {
	case err != nil:
		return driver.Grant{}, classify(err, key)
	case len(v) == 2 && v[0] == 0:
		return driver.Grant{}, &driver.ContendedError{Remaining: pttl(v[1])}
	case len(v) != 3:
		return driver.Grant{}, fmt.Errorf("redisstore: unexpected acquire reply %v", v)
	}
	return driver.Grant{Fence: uint64(v[1]), Holds: int(v[2]), TTL: ttl}, nil
}

// Extend is Store.Extend.
func (f *FairStore) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	return f.s.Extend(ctx, key, token, ttl)
}

// ExtendBatch is Store.ExtendBatch.
func (f *FairStore) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	return f.s.ExtendBatch(ctx, reqs)
}

// Release is Store.Release: a final release publishes on the key's
// channel, which wakes the head of the queue.
func (f *FairStore) Release(ctx context.Context, key, token string) error {
	return f.s.Release(ctx, key, token)
}

// Inspect is Store.Inspect.
func (f *FairStore) Inspect(ctx context.Context, key string) (driver.Info, error) {
	return f.s.Inspect(ctx, key)
}

// List is Store.List; queue keys are not reported.
func (f *FairStore) List(ctx context.Context, prefix string, fn func(key string, info driver.Info) bool) error {
	return f.s.List(ctx, prefix, fn)
}

// Doctor is Store.Doctor; its acl check covers the fair scripts' commands
// too (sorted sets and lists).
func (f *FairStore) Doctor(ctx context.Context, ttl time.Duration) []driver.Check {
	return f.s.Doctor(ctx, ttl)
}

// Waiters implements driver.WaiterCounter: how many tokens queue for key
// with a waiter lease that has not ended (one script call), so a waiter
// that gave up or died is no longer counted. A bad key is refused as by
// Acquire; other errors are go-redis's.
func (f *FairStore) Waiters(ctx context.Context, key string) (int, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	_, waiters := f.QueueKeys(key)
	n, err := fairWaitersScript.Run(ctx, f.s.client, []string{waiters}).Int()
	return n, classify(err, key)
}
