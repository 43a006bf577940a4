package dlock

import (
	"math/rand/v2"
	"time"

	"example.com/dlock/driver"
)

// Limits enforced before any I/O. Anything outside them is rejected with an
// error matching ErrInvalid.
const (
	// MaxKeyLen is the longest key accepted, in bytes.
	MaxKeyLen = driver.MaxKeyLen
	// MinTTL is the shortest lease accepted. Shorter leases leave no validity
	// once clock drift is subtracted.
	MinTTL = 10 * time.Millisecond
	// MaxTTL is the longest lease accepted. A longer one is almost always a
	// unit mistake, and would block the key for that long after a crash.
	MaxTTL = 24 * time.Hour

	// DefaultLease is the lease used when no TTL is given: it is renewed every
	// DefaultLease/3 while the holder lives, as Redisson's watchdog does.
	DefaultLease = 30 * time.Second

	// maxResourceLen bounds WithRead's resource key, as a sanity check.
	maxResourceLen = 4096
)

// Option configures a Client (passed to New, where it sets the default) or a
// single call (passed to Lock, TryLock or Do, where it overrides it).
type Option func(*config)

type config struct {
	ttl     time.Duration // lease length
	renew   bool          // renew automatically every ttl/3
	wait    time.Duration // bound on waiting; <0 means "until ctx ends"
	backoff Backoff
	clock   Clock
	// read is the resource key read with the grant (WithRead), nil for none;
	// a pointer keeps config, copied into every local waiter, small.
	read *string
	// onRetry, if set, is told of every failed attempt of a wait (WithOnRetry).
	onRetry func(failures int, err error)
	// obs, if set, is told of the call's events and its holding's
	// (WithObserver, observe.go).
	obs Observer
	// meta is the holder metadata recorded with each holding (WithMeta).
	meta string
}

func defaultConfig() config {
	return config{
		ttl:     DefaultLease,
		renew:   true,
		wait:    -1,
		backoff: ExponentialBackoff(2*time.Millisecond, 250*time.Millisecond),
		clock:   systemClock{},
	}
}

// WithTTL sets a fixed lease: the lock expires ttl after it is acquired or
// last extended, and is never renewed. A ttl outside the store's bounds makes
// the call (or New) fail with ErrInvalid before any I/O; on a session store
// every lease lasts the session TTL. Default: automatic renewal of a
// DefaultLease lease. More: docs/api.md#withttl.
func WithTTL(ttl time.Duration) Option {
	return func(c *config) { c.ttl, c.renew = ttl, false }
}

// WithAutoRenew sets a lease of length lease, renewed every lease/3 while the
// Lease is held (after Lease.Extend(ctx, d): every d/3, asking for d); a
// failed renewal is retried sooner until the validity runs out. Bounds as for
// WithTTL (docs/api.md#withautorenew). Default: WithAutoRenew(DefaultLease).
func WithAutoRenew(lease time.Duration) Option {
	return func(c *config) { c.ttl, c.renew = lease, true }
}

// WithWait bounds how long Lock waits for a held lock, independently of the
// lease. Zero means a single attempt, as TryLock. A negative d makes New,
// or the call it is passed to, fail with ErrInvalid before any I/O.
// Default: wait until the context ends.
func WithWait(d time.Duration) Option {
	return func(c *config) {
		c.wait = d
		if d < 0 {
			c.wait = -2 // remembered as invalid; see validate
		}
	}
}

// WithBackoff sets how long a waiter sleeps between attempts when the store
// cannot notify it of a release. A nil b makes New, or the call it is
// passed to, fail with ErrInvalid before any I/O. Default:
// ExponentialBackoff(2ms, 250ms).
func WithBackoff(b Backoff) Option {
	return func(c *config) { c.backoff = b }
}

// WithOnRetry calls f from the waiting goroutine after each failed attempt
// of a wait, with the number of failures so far and the last error; f must
// not block. It is not called for a single try or for errors that end the
// wait (docs/api.md#withonretry). Default: none.
func WithOnRetry(f func(failures int, err error)) Option {
	return func(c *config) { c.onRetry = f }
}

// WithClock replaces the clock used for validity, expiry and waiting; meant
// for tests. A nil clk makes New, or the call it is passed to, fail with
// ErrInvalid before any I/O. Default: the system's monotonic clock.
func WithClock(clk Clock) Option {
	return func(c *config) { c.clock = clk }
}

// WithRead makes the store read resource (its key as the store names it) in
// the step that grants the lock: Lease.Value returns it, and Lease.Commit
// writes it back with the release. On a store that cannot (no driver.Atomic)
// it changes nothing and Lease.ValueRead is false. A resource over 4096
// bytes, or outside the lock's Cluster slot, fails with ErrInvalid. Default:
// no read. More: docs/api.md#withread.
func WithRead(resource string) Option {
	if resource == "" {
		return func(c *config) { c.read = nil }
	}
	return func(c *config) { c.read = &resource }
}

// WithMeta records meta with each holding the call starts, on a store that
// keeps holder metadata (driver.MetaKeeper): dlock status and list, and
// driver.Inspector's Info.Meta, show it while the holding lasts, as
// bsm/redislock's Metadata does. Say who holds the key (host, process,
// purpose); never put secrets in it. A re-entry keeps the metadata the
// holding started with. On other stores it changes nothing. A meta over
// driver.MaxMetaLen (256) bytes, not UTF-8 or with control characters makes
// New, or the call it is passed to, fail with ErrInvalid before any I/O.
// Default: none. More: docs/api.md#withmeta.
func WithMeta(meta string) Option {
	return func(c *config) { c.meta = meta }
}

func (c *config) validate() error {
	switch {
	case c.ttl < MinTTL:
		return invalidf("ttl %v is below the minimum %v", c.ttl, MinTTL)
	case c.ttl > MaxTTL:
		return invalidf("ttl %v is above the maximum %v", c.ttl, MaxTTL)
	case c.wait == -2:
		return invalidf("negative wait")
	case c.backoff == nil:
		return invalidf("nil backoff")
	case c.clock == nil:
		return invalidf("nil clock")
	case c.read != nil && len(*c.read) > maxResourceLen:
		return invalidf("resource key of %d bytes is longer than %d", len(*c.read), maxResourceLen)
	case c.meta != "":
		return driver.ValidateMeta(c.meta)
	}
	return nil
}

// ValidateKey reports whether key is acceptable: non-empty, valid UTF-8 and at
// most MaxKeyLen bytes. The error matches ErrInvalid. It is
// driver.ValidateKey.
func ValidateKey(key string) error { return driver.ValidateKey(key) }

// Backoff returns how long to sleep before the next attempt, given how many
// attempts have failed so far (starting at 1). It must be a pure function of
// its argument, safe for concurrent use: no state is shared between waiters.
type Backoff func(failures int) time.Duration

// ExponentialBackoff doubles the delay from min up to max, and picks a random
// point in the upper half of it so that waiters do not wake in lock-step:
// after n failures the pause is in [d/2, d], d = min·2^(n-1) capped at max.
// A min that is not positive (or above max) starts at max; a max that is
// not positive means no pause at all.
func ExponentialBackoff(min, max time.Duration) Backoff {
	return func(failures int) time.Duration {
		d := min
		for i := 1; i < failures && d < max; i++ {
			d *= 2
		}
		if d > max || d <= 0 {
			d = max
		}
		if d <= 0 {
			return 0
		}
		return d/2 + rand.N(d/2+1)
	}
}
