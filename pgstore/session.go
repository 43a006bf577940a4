package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/sqlsession"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultCheckInterval is SessionOptions.CheckInterval when it is zero.
const DefaultCheckInterval = 5 * time.Second

// MinCheckInterval is the shortest check interval accepted.
const MinCheckInterval = 500 * time.Millisecond

// DefaultConnWait is SessionOptions.ConnWait when it is zero.
const DefaultConnWait = time.Second

// ErrPoolExhausted means the store needed a connection from the pool and
// the pool gave none within SessionOptions.ConnWait: every connection of the
// pool is in use (by the application, or pinned by session locks). It
// matches driver.ErrUnavailable: a later attempt may succeed. The call
// changed nothing.
var ErrPoolExhausted = fmt.Errorf("%w: pgstore: the connection pool is exhausted", driver.ErrUnavailable)

// ErrConnLimit means the call needed one more pinned connection than
// SessionOptions.MaxConns allows (a queued wait needs a connection of its
// own). It matches driver.ErrUnavailable: the dlock Client then waits with
// its backoff instead of the server's queue. The call changed nothing.
var ErrConnLimit = fmt.Errorf("%w: pgstore: the session store's connection limit is reached", driver.ErrUnavailable)

// SessionOptions configure a SessionStore.
type SessionOptions struct {
	// Table is the prefix of the schema's names (default "dlock"): the
	// session store draws fences from the sequence <Table>_fence, created
	// by Migrate, and derives its advisory lock ids from Table and the key
	// (LockID).
	Table string
	// CheckInterval is the session's TTL as the dlock Client sees it
	// (driver.Model.SessionTTL, default DefaultCheckInterval, at least
	// MinCheckInterval): the Client checks each holding's connection about
	// this often, and a statement on a pinned connection that gets no answer
	// within it closes that connection (its locks are then lost).
	CheckInterval time.Duration
	// MaxConns bounds the connections the store pins at once: those holding
	// locks (any number of locks share one) plus those waiting in
	// AcquireQueued (one each). 0 means min(4, pool's MaxConns-1), at least
	// 1. It must be below the pool's MaxConns so that the application keeps
	// a connection.
	MaxConns int
	// LocksPerConn bounds the keys one pinned connection holds, as
	// mysqlstore's; 0 means no bound (PostgreSQL has no per-session limit
	// on advisory locks). Past LocksPerConn × MaxConns keys, Acquire
	// returns ErrConnLimit.
	LocksPerConn int
	// ConnWait bounds how long the store waits for a connection when every
	// connection of the pool is in use before it fails with
	// ErrPoolExhausted (default DefaultConnWait). When the pool has room,
	// opening a new connection may take up to 10 s (then the error matches
	// no sentinel: the server is slow or unreachable).
	ConnWait time.Duration
}

// SessionStore is a driver.Mutex on PostgreSQL session-level advisory locks
// (pg_try_advisory_lock, pg_advisory_lock) held on connections it takes from
// the caller's pool and pins: a lock lives as long as its connection.
// docs/postgres-modes.md says how connections are shared and bounded and
// what breaks the lock (a lock the server frees before the client notices).
// A server session shared with other clients (PgBouncer in transaction
// or statement mode) would let another client re-enter a lock as if it
// were its own, or (statement mode) close the server connection holding
// it: the store refuses to work through one, with ErrSharedSession (a
// check on its first pinned connection, and a guard in every lock
// statement). It is safe for concurrent use; Close gives the pinned
// connections back.
type SessionStore struct {
	pool    *pgxpool.Pool
	table   string
	seq     string // the fence sequence, as regclass text
	ident   string // database and table prefix, for the registry
	ttl     time.Duration
	max     int
	maxWait int // pinned connections that may wait at once
	perConn int // keys per pinned connection (0: no bound)
	wait    time.Duration

	done chan struct{} // closed by Close: queued waits end

	eng *sqlsession.Engine[*pgxpool.Conn, int64]

	rwMu   sync.Mutex        // guards rwKeys and each rwKey's refs
	rwKeys map[string]*rwKey // the read-write keys with a holding, a mark or a call

	mu sync.Mutex // guards the shared-session verdict below
	// sharedChecked is set once checkShared has seen whether a pooler
	// shares server sessions, or a guard found one; shared is then the
	// verdict (nil: not shared), returned by every later pin.
	sharedChecked bool
	shared        error
	// noSharedCheck and noSharedGuard turn the check and the lock
	// statements' guard off, for the tests' negative control.
	noSharedCheck, noSharedGuard bool
	// noQueuedCheck drops the read statement's check for a queued
	// exclusive request, for the tests' negative control.
	noQueuedCheck bool
}

var (
	_ driver.Mutex         = (*SessionStore)(nil)
	_ driver.Queuer        = (*SessionStore)(nil)
	_ driver.WaiterCounter = (*SessionStore)(nil)
	_ driver.SessionKeeper = (*SessionStore)(nil)
)

// NewSession returns a SessionStore on pool, which it never closes. It
// returns an error matching driver.ErrInvalid if pool is nil, Table is not a
// lower-case SQL identifier of at most 40 bytes, CheckInterval is below
// MinCheckInterval, or MaxConns is negative or not below the pool's
// MaxConns. It does no I/O: the fence sequence must exist (Migrate) before
// the first Acquire.
func NewSession(pool *pgxpool.Pool, opts SessionOptions) (*SessionStore, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgstore: nil pool", driver.ErrInvalid)
	}
	nm, err := namesFor(opts.Table)
	if err != nil {
		return nil, err
	}
	table := opts.Table
	if table == "" {
		table = DefaultTable
	}
	ttl := opts.CheckInterval
	if ttl == 0 {
		ttl = DefaultCheckInterval
	}
	if ttl < MinCheckInterval {
		return nil, fmt.Errorf("%w: pgstore: check interval %v is below %v", driver.ErrInvalid, ttl, MinCheckInterval)
	}
	poolMax := int(pool.Config().MaxConns)
	n := opts.MaxConns
	if n == 0 {
		n = max(1, min(4, poolMax-1))
	}
	if opts.LocksPerConn < 0 {
		return nil, fmt.Errorf("%w: pgstore: negative LocksPerConn", driver.ErrInvalid)
	}
	if n < 0 || n >= poolMax {
		return nil, fmt.Errorf("%w: pgstore: MaxConns %d must be at least 1 and below the pool's MaxConns %d", driver.ErrInvalid, n, poolMax)
	}
	wait := opts.ConnWait
	if wait <= 0 {
		wait = DefaultConnWait
	}
	s := &SessionStore{
		pool: pool, table: table, ident: ident(pool, table), seq: pgx.Identifier{nm.fence}.Sanitize(),
		ttl: ttl, max: n, maxWait: max(n-1, 0), perConn: opts.LocksPerConn, wait: wait,
		done: make(chan struct{}),
	}
	s.eng = s.newEngine()
	return s, nil
}

// Model implements driver.Mutex: session-based, the session being the
// pinned connection, checked every CheckInterval.
func (s *SessionStore) Model() driver.Model {
	return driver.Model{ServerClock: true, Session: true, SessionTTL: s.ttl}
}

// Pool returns the pool the store takes its connections from.
func (s *SessionStore) Pool() *pgxpool.Pool { return s.pool }

// LockID is the advisory lock id (pg_advisory_lock's bigint) of key under
// the table prefix: the first 8 bytes, big-endian, of
// SHA-256(table + "\x00" + key). Another program locks the same key with
// pg_advisory_lock(LockID(table, key)). Two keys whose ids collide (about
// one chance in 2^64 for a pair) exclude each other: never two holders of
// one key, but a key may look held when only its twin is.
func LockID(table, key string) int64 {
	h := sha256.Sum256([]byte(table + "\x00" + key))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

// split is id as pg_locks shows a bigint advisory lock: classid (high 32
// bits), objid (low 32 bits), objsubid 1.
func split(id int64) (classid, objid uint32) {
	return uint32(uint64(id) >> 32), uint32(uint64(id))
}

// errSessionClosed is returned by calls after Close.
var errSessionClosed = fmt.Errorf("%w: pgstore: session store closed", driver.ErrInvalid)

// Close gives every pinned connection back to the pool after unlocking its
// advisory locks (pg_advisory_unlock_all), which frees every key the store
// holds; a connection that cannot be unlocked is closed instead, which frees
// them too once the server sees it. Queued waits end as if their context
// had (their connections are closed). Later Acquire, AcquireQueued, Extend,
// ExtendBatch and Release fail with an error matching driver.ErrInvalid
// before any I/O; KeepAlive returns driver.ErrInvalid;
// Inspect, Waiters and Migrate still work through the pool. It does not
// close the pool. It returns the errors of the connections it could not
// unlock, joined; calling it again does nothing and returns nil.
func (s *SessionStore) Close(ctx context.Context) error {
	pins, first := s.eng.Close() // a queued wait ends itself (s.done)
	if !first {
		return nil
	}
	close(s.done)
	var errs []error
	for _, p := range pins {
		errs = append(errs, giveBack(ctx, p, true))
	}
	return errors.Join(errs...)
}

// KeepAlive implements driver.SessionKeeper: it checks every connection
// that holds keys with one round trip each (advisory locks have no TTL to
// renew). A connection that fails is closed, its keys forgotten (the server
// released them), and KeepAlive returns an error matching
// driver.NotHeld(false). With nothing held it does nothing. If ctx ends
// first it returns ctx's error and forgets nothing; after Close,
// driver.ErrInvalid.
func (s *SessionStore) KeepAlive(ctx context.Context) error {
	return s.eng.KeepAlive(ctx, func(ctx context.Context, c *pgxpool.Conn) (any, error) {
		_, err := c.Exec(ctx, "SELECT 1")
		return nil, err
	})
}

// ident names the database pool connects to, with the table prefix.
func ident(pool *pgxpool.Pool, table string) string {
	c := pool.Config().ConnConfig
	return fmt.Sprintf("%s:%d/%s\x00%s", c.Host, c.Port, c.Database, table)
}
