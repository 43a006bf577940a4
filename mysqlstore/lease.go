package mysqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"example.com/dlock/driver"
)

// Options configure the lease table (New) and name the schema for Migrate
// and Schema.
type Options struct {
	// Table is the prefix of the schema's objects (<Table>_locks,
	// <Table>_fence, <Table>_rows, <Table>_permits, <Table>_semaphores,
	// <Table>_rates, <Table>_rwholds, <Table>_rwkeys): letters, digits and underscores, at
	// most 48. Empty means DefaultTable ("dlock").
	Table string
	// Retention is how long a free row (released or expired) stays before
	// a sweep deletes it; 0 means DefaultRetention. Keeping it a little
	// spares the hot keys a DELETE and a re-INSERT on every hand-over.
	Retention time.Duration
	// SweepEvery is the least time between two sweeps by one Store; 0
	// means Retention. A sweep runs after an Acquire or Release that finds
	// it due (two extra statements, at most once per SweepEvery), and on
	// demand with Sweep.
	SweepEvery time.Duration
}

// DefaultRetention is Options.Retention when zero.
const DefaultRetention = 5 * time.Second

// MinTTL is the shortest lease the lease table accepts: below it the round
// trip itself eats the lease.
const MinTTL = 10 * time.Millisecond

// Store is the lease table: a driver.Mutex whose holdings are rows with an
// expiry on the database clock. Acquire, Extend, Release and Transfer
// (driver.Transferer: the Client's hand-over to a waiter of its own) are
// each one statement (INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING, MariaDB
// 10.5+) in autocommit, atomic and token-checked. Acquire's is prepared on
// the server, once per pool connection that runs it (then one round trip
// each time; Close deallocates it); the others are one round trip when the
// pool's DSN has interpolateParams=true (the URL opener sets it), two
// (prepare, execute) with go-sql-driver's default. It is safe for
// concurrent use and holds no connection between calls.
type Store struct {
	db   *sql.DB
	n    names
	opts Options

	acquireSQL, extendSQL, releaseSQL, transferSQL string
	anchorSQL, readPermitsSQL, acquirePermitsSQL   string // the Semaphore's (semaphore.go)
	allowSQL                                       string // the RateLimiter's (ratelimit.go)
	rwAnchorSQL, readRWSQL                         string // the RWMutex's (rwlock.go)
	mark                                           markCfg
	acquirePrep                                    prepared // acquireSQL, prepared on the server
	permitsPrep                                    prepared // acquirePermitsSQL, prepared on the server

	noFenceCheck bool // tests' negative control only: CompleteRecordTx checks nothing
	foldedWaits  bool // tests' negative control only: BeginRecordTx waits for row locks
	rwNoMark     bool // tests' negative control only: a refused writer leaves no mark
	rwNoPrune    bool // tests' negative control only: acquisitions skip expired read-write holdings

	sweepMu   sync.Mutex
	lastSweep time.Time
	deadlocks atomic.Int64

	rollbackWait time.Duration // bounds a rollback's reply (rollbackWait; tests shorten it)
}

var zeroOwner = make([]byte, 32)

// New returns the lease table on db with opts. It does no I/O (run Migrate
// once first) and never closes db. It returns an error matching
// driver.ErrInvalid for a nil db or bad Options.
func New(db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: mysqlstore: nil *sql.DB", driver.ErrInvalid)
	}
	n, err := tableNames(opts.Table)
	if err != nil {
		return nil, err
	}
	if opts.Retention < 0 || opts.SweepEvery < 0 {
		return nil, fmt.Errorf("%w: mysqlstore: negative Retention or SweepEvery", driver.ErrInvalid)
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.SweepEvery == 0 {
		opts.SweepEvery = opts.Retention
	}
	s := &Store{db: db, n: n, opts: opts, lastSweep: time.Now(), mark: defaultMark, rollbackWait: rollbackWait}
	s.prepareSQL()
	return s, nil
}

// now is the database clock in UTC, whatever the session's time_zone.
const now = "UTC_TIMESTAMP(6)"

// remaining is the row's remaining lease in microseconds (negative: free).
const remaining = "TIMESTAMPDIFF(MICROSECOND, " + now + ", expires_at)"

// prepareSQL builds the four statements (Acquire's: acquireStmt, with the
// waiter mark; Transfer's: transferStmt). The
// ON DUPLICATE KEY UPDATE assignments are written so that no expression
// reads a column assigned before it in a way that matters: MariaDB assigns
// left to right by default (later expressions see the new values) and all
// at once under sql_mode SIMULTANEOUS_ASSIGNMENT; both give the same result
// here.
func (s *Store) prepareSQL() {
	L := s.n.locks
	s.acquireSQL = acquireStmt(s.n, s.mark)
	// Extend: only the live holder's row moves; a missing key gets a free
	// row (owner zero, expired: nobody holds it), which the sweep removes.
	s.extendSQL = "INSERT INTO " + L + " (name, owner, holds, fence, expires_at) VALUES (?, ?, 0, 0, '1970-01-01')" +
		" ON DUPLICATE KEY UPDATE" +
		" expires_at = IF(owner = ? AND expires_at > " + now + ", " + now + " + INTERVAL ? MICROSECOND, expires_at)" +
		" RETURNING owner, holds, fence, " + remaining
	// Release: the last hold frees the row (expires_at = now, holds 0),
	// an earlier one takes a hold off. expires_at is assigned first, from
	// the old values; holds then tests "expires_at >= now", true for a
	// live row and for the row just freed (expires_at = now), whichever
	// way MariaDB assigns. No user variable: RETURNING @var reads NULL
	// over the text protocol (interpolateParams=true), measured on 10.11.
	s.releaseSQL = "INSERT INTO " + L + " (name, owner, holds, fence, expires_at) VALUES (?, ?, 0, 0, '1970-01-01')" +
		" ON DUPLICATE KEY UPDATE" +
		" expires_at = IF(owner = ? AND expires_at > " + now + " AND holds <= 1, " + now + ", expires_at)," +
		" holds = IF(owner = ? AND expires_at >= " + now + ", holds - 1, holds)" +
		" RETURNING owner, holds, fence, " + remaining
	s.transferSQL = transferStmt(s.n)
	s.anchorSQL, s.readPermitsSQL = anchorStmt(s.n), readPermitsStmt(s.n)
	s.acquirePermitsSQL = acquirePermitsStmt(s.n, s.anchorSQL, s.readPermitsSQL)
	s.allowSQL = allowStmt(s.n)
	s.rwAnchorSQL, s.readRWSQL = rwAnchorStmt(s.n), readRWStmt(s.n)
}

// Model implements driver.Mutex: per-key leases of at least MinTTL on the
// database clock, kept in microseconds.
func (s *Store) Model() driver.Model {
	return driver.Model{MinTTL: MinTTL, Granularity: time.Microsecond, ServerClock: true}
}

// row is what a statement returns of the key's row after it ran.
type row struct {
	owner  []byte
	holds  int
	fence  uint64
	remain time.Duration
}

func (r row) mine(d []byte) bool { return bytes.Equal(r.owner, d) && r.remain > 0 }

// taken reports whether another owner holds the row, or Break ended the
// holding of d (its hold count negated, see breakSQL).
func (r row) taken(d []byte) bool {
	return !bytes.Equal(r.owner, d) && r.holds > 0 && r.remain > 0 || bytes.Equal(r.owner, d) && r.holds < 0
}

// exec runs one of the statements and scans the row it returns, retrying a
// deadlock victim (its statement was rolled back whole, so a retry is
// safe) up to three times; deadlocks are counted (Deadlocks).
func (s *Store) exec(ctx context.Context, op, q string, args ...any) (row, error) {
	var r row
	var us int64
	if err := s.query(ctx, op, q, []any{&r.owner, &r.holds, &r.fence, &us}, args...); err != nil {
		return row{}, err
	}
	r.remain = time.Duration(us) * time.Microsecond
	return r, nil
}

// query runs q and scans the row it returns into dest, retrying a deadlock
// victim up to three times (see exec).
func (s *Store) query(ctx context.Context, op, q string, dest []any, args ...any) error {
	return s.queryOn(op, func() *sql.Row { return s.db.QueryRowContext(ctx, q, args...) }, dest)
}

// queryPrepared is query with the prepared statement p of q.
func (s *Store) queryPrepared(ctx context.Context, op string, p *prepared, q string, dest []any, args ...any) error {
	st, err := p.get(ctx, s.db, q)
	if err != nil {
		if err == errClosedStore {
			return err
		}
		return wrap(op, err)
	}
	return s.queryOn(op, func() *sql.Row { return st.QueryRowContext(ctx, args...) }, dest)
}

// queryOn scans the row run returns into dest, retrying a deadlock victim
// up to three times (see exec).
func (s *Store) queryOn(op string, run func() *sql.Row, dest []any) error {
	var err error
	for try := 0; try < 3; try++ {
		err = run().Scan(dest...)
		if err == nil {
			return nil
		}
		if errNumber(err) != erDeadlock {
			break
		}
		s.deadlocks.Add(1)
	}
	return wrap(op, err)
}

// Close deallocates Acquire's and AcquirePermits' prepared statements on
// the pool's connections;
// Acquire, AcquirePermits and AllowN then return an error matching
// driver.ErrInvalid, while Extend, Release, Transfer, ExtendPermits and
// ReleasePermits still work (holders can end their holdings). It
// never closes the pool. A Store that is dropped without Close leaves those
// statements on the connections they ran on until they close.
func (s *Store) Close() error {
	return errors.Join(s.acquirePrep.close(), s.permitsPrep.close())
}

// Deadlocks returns how many statements of this Store the server chose as
// a deadlock victim (each was retried). The design aims at zero; tests
// count it.
func (s *Store) Deadlocks() int64 { return s.deadlocks.Load() }

// Acquire takes key for token for ttl, or re-enters (one more hold, the
// same fence, the later expiry). If another token holds key it returns a
// *driver.ContendedError with the holder's remaining lease and changes
// nothing but the waiter mark: if no other waiter is marked, the caller is,
// and the error's Retry says when to try again; the key, once free, is then
// reserved for the caller until a little after that (the waiter mark). A free
// key reserved for another waiter is contended too, with the reservation's
// remaining time. Bad arguments (an empty key or one over MaxKeyBytes, an
// empty token, a ttl under a millisecond) return driver.ErrInvalid before
// any I/O, and so does a call after Close; a missing schema or privilege
// driver.ErrRefused; other errors leave the outcome unknown.
func (s *Store) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := checkArgs(key, token, ttl, true); err != nil {
		return driver.Grant{}, err
	}
	d := digest(token)
	r, err := s.acquire(ctx, key, d, ttl)
	if err != nil {
		return driver.Grant{}, err
	}
	s.maybeSweep(ctx)
	if !r.mine(d) {
		return driver.Grant{}, r.contended()
	}
	if meta := driver.MetaFrom(ctx); meta != "" && r.holds == 1 {
		s.setMeta(ctx, key, r.fence, meta) // a new holding's: a re-entry keeps the first
	}
	return driver.Grant{Fence: r.fence, Holds: r.holds, TTL: ttl}, nil
}

// Extend sets key's expiry to ttl from now on the database clock if token
// holds it; otherwise it changes nothing and returns driver.NotHeld. It
// never re-creates a holding (for a missing key it leaves a free row that
// the sweep removes). Bad arguments return driver.ErrInvalid before any
// I/O; a missing schema or privilege driver.ErrRefused; other errors leave the outcome
// unknown (the expiry may or may not have been set).
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := checkArgs(key, token, ttl, true); err != nil {
		return driver.Grant{}, err
	}
	d := digest(token)
	r, err := s.exec(ctx, "extend", s.extendSQL, []byte(key), zeroOwner, d, ttl.Microseconds())
	if err != nil {
		return driver.Grant{}, err
	}
	if !r.mine(d) {
		return driver.Grant{}, driver.NotHeld(r.taken(d))
	}
	return driver.Grant{Fence: r.fence, Holds: r.holds, TTL: ttl}, nil
}

// Release removes one hold of token on key; the last one frees the key.
// If token does not hold key it changes nothing and returns driver.NotHeld.
// Other errors are as for Extend (the hold may or may not have been
// removed).
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := checkArgs(key, token, 0, false); err != nil {
		return err
	}
	d := digest(token)
	r, err := s.exec(ctx, "release", s.releaseSQL, []byte(key), zeroOwner, d, d)
	if err != nil {
		return err
	}
	// Released now: a hold left on a live row, or the row freed by this
	// very statement (expires_at = its now: 0 µs left; a row freed by an
	// earlier statement has less, an expired one still has holds).
	released := r.holds >= 1 && r.remain > 0 || r.holds == 0 && r.remain == 0
	if !bytes.Equal(r.owner, d) || !released {
		return driver.NotHeld(r.taken(d))
	}
	s.maybeSweep(ctx)
	return nil
}
