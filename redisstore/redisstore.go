package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

var (
	// lock.lua defines the layout's parser; it goes in front of every
	// script that reads a lock, so that they share one copy.
	//go:embed lock.lua
	lockLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed extend.lua
	extendLua string
	//go:embed release.lua
	releaseLua string
	//go:embed inspect.lua
	inspectLua string
	//go:embed fenced_set.lua
	fencedSetSrc string

	acquireSrc = lockLua + acquireLua
	extendSrc  = lockLua + extendLua
	releaseSrc = lockLua + releaseLua
	inspectSrc = lockLua + inspectLua

	acquireScript   = redis.NewScript(acquireSrc)
	extendScript    = redis.NewScript(extendSrc)
	releaseScript   = redis.NewScript(releaseSrc)
	inspectScript   = redis.NewScript(inspectSrc)
	fencedSetScript = redis.NewScript(fencedSetSrc)
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "dlock:"

// Options configures a Store. The zero value (or nil) gives the defaults.
type Options struct {
	// Prefix is prepended to every Redis key and channel the store uses.
	// Default: DefaultPrefix ("dlock:").
	Prefix string

	// NoBatching sends every acquire, release and hand-over as its own
	// command. Default: false: while a few such calls are in flight, the next
	// ones go out together as one pipeline (see the package doc). Set it if
	// something between the store and Redis must see one command per call.
	NoBatching bool

	// Retention is how long a released lock keeps its tombstone (its last
	// fence) and an owner's record of its final release or transfer, so
	// that a command resent by go-redis is recognised (see the package
	// doc). New raises it to the client's retry window when it can read
	// the client's options (a *redis.Client or *redis.ClusterClient):
	// MaxRetries (MaxRedirects for a Cluster) × (WriteTimeout + ReadTimeout
	// + MaxRetryBackoff), 33 s with go-redis v9.23's defaults. With another
	// client, or with timeouts off (negative), keep it above the longest
	// time a resend can come after the first run. Memory: a few hundred
	// bytes per key released within the last Retention. Default:
	// DefaultRetention. Negative is invalid.
	Retention time.Duration

	// Fair asks for the fair lock (FIFO across processes, see FairStore):
	// NewFair and Open (URL parameter fair=true) read it. New refuses it
	// with an error matching driver.ErrInvalid, since a *Store lets any
	// caller take a free lock. Default: false.
	Fair bool

	// WaiterLease is how long a FairStore waiter keeps its place in the
	// queue without renewing it: a waiter that stops renewing (its process
	// died) is evicted at most this long after its last renewal. Waiters
	// renew every third of it. Only NewFair reads it. Default:
	// DefaultWaiterLease; below MinWaiterLease (other than 0) is invalid.
	WaiterLease time.Duration
}

// DefaultRetention is the Retention used when Options.Retention is 0.
const DefaultRetention = 30 * time.Second

// Store is a driver.Mutex backed by Redis. It is safe for concurrent use.
// It does not own the client: Close releases only the store's subscription.
type Store struct {
	client redis.UniversalClient
	prefix string
	subs   *subscriber
	batch  *batcher // pipelines concurrent hot-path calls (batch.go); nil if Options.NoBatching
	keep   any      // Options.Retention in milliseconds, boxed once for the scripts
	// resends: the client may resend a command (go-redis's retries), so a
	// final release leaves its record (see release.lua); without them
	// nothing could ever consult it.
	resends bool

	retention time.Duration
	sentinel  *redis.FailoverOptions // set by the redis+sentinel opener, for Doctor
	fair      bool                   // the Store of a FairStore: Doctor checks the fair scripts' commands too
}

var (
	_ driver.Mutex         = (*Store)(nil)
	_ driver.Notifier      = (*Store)(nil)
	_ driver.BatchExtender = (*Store)(nil)
	_ driver.Inspector     = (*Store)(nil)
	_ driver.MetaKeeper    = (*Store)(nil)
)

// New returns a store that uses client. It returns an error matching
// driver.ErrInvalid if client is nil, opts.Retention is negative or
// opts.Fair is set (see NewFair). It makes no network call.
func New(client redis.UniversalClient, opts *Options) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil redis client", driver.ErrInvalid)
	}
	prefix, keep := DefaultPrefix, DefaultRetention
	if opts != nil && opts.Prefix != "" {
		prefix = opts.Prefix
	}
	if opts != nil && opts.Fair {
		return nil, fmt.Errorf("%w: Options.Fair: use NewFair", driver.ErrInvalid)
	}
	if opts != nil && opts.Retention < 0 {
		return nil, fmt.Errorf("%w: negative Retention %v", driver.ErrInvalid, opts.Retention)
	} else if opts != nil && opts.Retention > 0 {
		keep = opts.Retention
	}
	keep = max(keep, retryWindow(client))
	s := &Store{client: client, prefix: prefix, subs: newSubscriber(client), keep: ms(keep), retention: keep, resends: resends(client)}
	if opts == nil || !opts.NoBatching {
		s.batch = new(batcher)
	}
	return s, nil
}

// Retention returns how long a released lock's state is kept
// (Options.Retention, or the client's retry window if longer): after its
// lease or its retention ends, nothing of a lock is left in Redis.
func (s *Store) Retention() time.Duration { return s.retention }

// Close ends the store's shared subscription connection, if one is open,
// and opens no other: waiters still subscribed, and later ones, fall back to
// waking at the holder's expiry (Subscribe returns an error matching
// driver.ErrUnavailable). Locking keeps working. It does not close the client,
// and it does not wait for a connection still being dialled (against an
// unresponsive server that lasts up to the client's timeouts): that one is
// closed as soon as its dial ends. It returns the pub/sub connection's
// Close error, if any (nil when none was open, or on a second call).
func (s *Store) Close() error { return s.subs.close() }

// Keys returns the Redis keys of lock key: the lock, and the name of the
// fence counter that earlier versions of this package kept (this version
// neither reads nor writes it; see the package doc). It does no I/O and
// does not validate key.
func (s *Store) Keys(key string) (lock, fence string) {
	lock = s.prefix + "{" + key + "}"
	return lock, lock + ":fence"
}

func (s *Store) channel(key string) string { return s.lock(key) + ":released" }

func (s *Store) lock(key string) string { return s.prefix + "{" + key + "}" }

// checkKey rejects keys that would break the hash tag: a key starting with
// '}' would make the tag empty and scatter the lock's keys over slots.
func checkKey(key string) error {
	if err := driver.ValidateKey(key); err != nil {
		return err
	}
	if strings.HasPrefix(key, "}") {
		return fmt.Errorf("%w: key must not start with '}' (it would break the Cluster hash tag)", driver.ErrInvalid)
	}
	return nil
}

// ms converts a TTL to whole milliseconds, rounding up so the server never
// holds the key for less than the caller was promised.
func ms(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// Acquire implements driver.Mutex in one script call. If another token
// holds key it returns a *driver.ContendedError with the holder's remaining
// time (negative if the key has no expiry) and changes nothing. A key that
// driver.ValidateKey refuses, or that starts with '}' (it would break the
// Cluster hash tag), returns an error matching driver.ErrInvalid before any
// I/O; the same holds for every method that takes a key. Refusals match
// driver.ErrRefused (see the package doc); any other error is go-redis's
// and leaves the outcome unknown.
func (s *Store) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := checkKey(key); err != nil {
		return driver.Grant{}, err
	}
	lock := s.lock(key)
	var cmd *redis.Cmd
	if meta := driver.MetaFrom(ctx); meta != "" {
		cmd = s.run(ctx, hotAcquire, []any{nil, nil, 2, lock, metaKey(lock), token, ttlArg(ttl), callID(), meta})
	} else {
		cmd = s.run(ctx, hotAcquire, []any{nil, nil, 1, lock, token, ttlArg(ttl), callID()})
	}
	if f, ok := cmd.Val().(int64); ok && cmd.Err() == nil && f > 0 {
		return driver.Grant{Fence: uint64(f), Holds: 1, TTL: ttl}, nil // a first hold
	}
	var buf [3]int64
	v, err := ints(cmd, buf[:0])
	if err != nil {
		return driver.Grant{}, classify(err, key)
	}
	if len(v) == 2 && v[0] == 0 {
		return driver.Grant{}, &driver.ContendedError{Remaining: pttl(v[1])}
	}
	if len(v) != 3 {
		return driver.Grant{}, fmt.Errorf("redisstore: unexpected acquire reply %v", v)
	}
	return driver.Grant{Fence: uint64(v[1]), Holds: int(v[2]), TTL: ttl}, nil
}

// pttl turns a PTTL reply into a duration; -1 (no expiry) and -2 (no key)
// become "unknown" (negative).
func pttl(v int64) time.Duration {
	if v < 0 {
		return -1
	}
	return time.Duration(v) * time.Millisecond
}

// Extend implements driver.Mutex in one script call. If token does not
// hold key it changes nothing and returns driver.NotHeld (ErrExpired when
// the key is free, ErrTaken when another token holds it). Other errors are
// as for Acquire.
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := checkKey(key); err != nil {
		return driver.Grant{}, err
	}
	lock := s.lock(key)
	v, err := extendScript.Run(ctx, s.client, []string{lock, metaKey(lock)}, token, ms(ttl)).Int64Slice()
	return extendGrant(v, err, key, ttl)
}

func extendGrant(v []int64, err error, key string, ttl time.Duration) (driver.Grant, error) {
	switch {
	case err != nil:
		return driver.Grant{}, classify(err, key)
	case len(v) == 3 && v[0] == 1:
		return driver.Grant{Fence: uint64(v[1]), Holds: int(v[2]), TTL: ttl}, nil
	case len(v) == 1:
		return driver.Grant{}, notHeld(v[0] == 0)
	}
	return driver.Grant{}, fmt.Errorf("redisstore: unexpected extend reply %v", v)
}

func notHeld(expired bool) error {
	if expired {
		return fmt.Errorf("%w: %w", driver.ErrNotHeld, driver.ErrExpired)
	}
	return fmt.Errorf("%w: %w", driver.ErrNotHeld, driver.ErrTaken)
}

// Release implements driver.Mutex in one script call; the last hold leaves
// a tombstone for the retention and publishes on the release channel. If
// token does not hold key it changes nothing and returns driver.NotHeld, as
// Extend; a resent release that already ran answers nil. Other errors are as
// for Acquire.
func (s *Store) Release(ctx context.Context, key, token string) error {
	return s.release(ctx, key, token, 0)
}

// release runs release.lua; a fence above 0 is its minimum tombstone fence
// (ReleaseFence).
func (s *Store) release(ctx context.Context, key, token string, fence uint64) error {
	if err := checkKey(key); err != nil {
		return err
	}
	lock, channel, done := s.done(key, token)
	args := []any{nil, nil, 2, lock, done, token, channel, callID(), s.keep}
	if !s.resends {
		args = []any{nil, nil, 1, lock, token, channel, callID(), s.keep}
	}
	if fence > 0 {
		args = append(args, "", fence)
	}
	n, err := s.run(ctx, hotRelease, args).Int64()
	switch {
	case err != nil:
		return classify(err, key)
	case n >= 0:
		return nil
	}
	return notHeld(n == -1)
}

// ExtendBatch implements driver.BatchExtender with one pipeline. It loads the
// script and retries once if the server had lost it (after a restart, say).
func (s *Store) ExtendBatch(ctx context.Context, reqs []driver.ExtendRequest) []driver.ExtendResult {
	out := make([]driver.ExtendResult, len(reqs))
	for i, r := range reqs {
		if err := checkKey(r.Key); err != nil {
			out[i].Err = err
		}
	}
	cmds, err := s.extendPipeline(ctx, reqs, out)
	if err != nil && isNoScript(err) {
		if err = extendScript.Load(ctx, s.client).Err(); err == nil {
			cmds, _ = s.extendPipeline(ctx, reqs, out)
		}
	}
	for i, c := range cmds {
		if c != nil {
			v, err := c.Int64Slice()
			out[i].Grant, out[i].Err = extendGrant(v, err, reqs[i].Key, reqs[i].TTL)
		}
	}
	return out
}

func (s *Store) extendPipeline(ctx context.Context, reqs []driver.ExtendRequest, out []driver.ExtendResult) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(reqs))
	pipe := s.client.Pipeline()
	for i, r := range reqs {
		if out[i].Err == nil {
			lock := s.lock(r.Key)
			cmds[i] = extendScript.EvalSha(ctx, pipe, []string{lock, metaKey(lock)}, r.Token, ms(r.TTL))
		}
	}
	_, err := pipe.Exec(ctx)
	return cmds, err
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// Inspect implements driver.Inspector. A released lock still in its
// retention reports Held false and its last fence; a key holding something
// that is not a lock is an error matching driver.ErrRefused.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := checkKey(key); err != nil {
		return driver.Info{}, err
	}
	lock := s.lock(key)
	v, err := inspectScript.Run(ctx, s.client, []string{lock, metaKey(lock)}).Slice()
	if err != nil {
		return driver.Info{}, classify(err, key)
	}
	if len(v) != 5 {
		return driver.Info{}, fmt.Errorf("redisstore: unexpected inspect reply %v", v)
	}
	info, _ := infoOf(v)
	return info, nil
}

// metaKey is the key of lock's holder metadata (see acquire.lua).
func metaKey(lock string) string { return lock + ":meta" }

// KeepsMeta implements driver.MetaKeeper: holder metadata is kept in
// PREFIX{K}:meta as "<fence>:<meta>", written by the acquisition that
// starts a holding (only when there is metadata), given the lock's expiry
// by every extension, and shown by Inspect and List while the lock's
// fence is its own: a transfer drops it.
func (s *Store) KeepsMeta() bool { return true }

// SetFenced writes value to the Redis hash key (a protected resource, not a
// lock key: no prefix is added) only if fence is not below the fence stored
// with its current value. A stale write changes nothing and returns an error
// matching driver.ErrStaleFence. Other errors are go-redis's (the key holds
// another type: WRONGTYPE; the round trip failed: the write may or may not
// have been made).
func SetFenced(ctx context.Context, client redis.Scripter, key, value string, fence uint64) error {
	n, err := fencedSetScript.Run(ctx, client, []string{key}, fence, value).Int64()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: fence %d for %q", driver.ErrStaleFence, fence, key)
	}
	return nil
}

// GetFenced reads a value written by SetFenced, with its fence. A missing key
// returns "", 0 and no error. A key that is not a SetFenced hash returns the
// server's error (WRONGTYPE) or, for a hash without a fence, a parse error;
// a failed round trip returns go-redis's error.
func GetFenced(ctx context.Context, client redis.Cmdable, key string) (value string, fence uint64, err error) {
	v, err := client.HMGet(ctx, key, "value", "fence").Result()
	if err != nil || v[0] == nil {
		return "", 0, err
	}
	value, _ = v[0].(string)
	fs, _ := v[1].(string)
	_, err = fmt.Sscan(fs, &fence)
	return value, fence, errors.Join(err)
}
