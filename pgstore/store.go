package pgstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSweepInterval is how often a Store deletes expired rows when
// Options.SweepInterval is zero.
const DefaultSweepInterval = time.Minute

// Options configure a Store.
type Options struct {
	// Table is the prefix of the schema's names (DefaultTable when empty):
	// the lease table <Table>_locks, the sequence <Table>_fence, the
	// row-lock table <Table>_rows, the permits table <Table>_permits and
	// its function <Table>_permits_acquire, the idempotency records
	// <Table>_idempotency and their functions <Table>_idempotency_begin and
	// <Table>_idempotency_begin_tx, the rates table <Table>_rates and its
	// function <Table>_rates_allow. A lower-case SQL identifier of at most
	// 40 bytes, resolved through the connection's search_path.
	Table string
	// SweepInterval is how often the store deletes expired rows (0:
	// DefaultSweepInterval; negative: never, for a deployment that sweeps
	// otherwise). A released key keeps its row, free, so that its next
	// Acquire updates it in place; free and expired rows are deleted by
	// the sweep, so a key keeps a row for at most about this long after
	// its last holding ended.
	SweepInterval time.Duration
}

// Store is a driver.Mutex on a PostgreSQL lease table, with per-key leases
// on the database clock, a driver.Semaphore on its permits table (each
// holding of permits a lease of its own) and a driver.RateLimiter on its
// rates table (GCRA on the database clock). It is safe for concurrent use. It never closes the
// pool it was given; Close stops its background work (the listener
// connection and the sweep).
type Store struct {
	db      backend
	names   names
	sql     statements
	psql    permitStatements
	rwsql   rwStatements
	rsql    recordStatements
	ratesql rateStatements
	sweep   time.Duration

	lis *listener

	mu        sync.Mutex
	closed    bool
	sweepStop context.CancelFunc // ends the sweep; nil until it starts
	sweepDone chan struct{}      // closed when the sweep has ended
}

var (
	_ driver.Mutex      = (*Store)(nil)
	_ driver.Notifier   = (*Store)(nil)
	_ driver.Transferer = (*Store)(nil)
	_ driver.Inspector  = (*Store)(nil)
	_ driver.Lister     = (*Store)(nil)
	_ driver.Doctor     = (*Store)(nil)
)

// New returns a Store on pool, which it never closes. It does no I/O: run
// Migrate once (or the DDL of Schema) before the first lock. It returns an
// error matching driver.ErrInvalid if pool is nil or opts.Table is not a
// valid prefix.
func New(pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgstore: nil pool", driver.ErrInvalid)
	}
	return newStore(pgxBackend{pool}, opts)
}

// NewDB returns a Store on a *sql.DB, which it never closes. Locking works
// with any PostgreSQL driver whose placeholders are $1, $2...; waiting
// without polling (Subscribe) needs pgx's stdlib driver
// (github.com/jackc/pgx/v5/stdlib) and pins one of db's connections while a
// waiter listens; with another driver Subscribe returns an error matching
// errors.ErrUnsupported and waiters back off instead. Errors as New.
func NewDB(db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: pgstore: nil db", driver.ErrInvalid)
	}
	return newStore(sqlBackend{db}, opts)
}

func newStore(b backend, opts Options) (*Store, error) {
	n, err := namesFor(opts.Table)
	if err != nil {
		return nil, err
	}
	sweep := opts.SweepInterval
	if sweep == 0 {
		sweep = DefaultSweepInterval
	}
	s := &Store{db: b, names: n, sql: newStatements(n), psql: newPermitStatements(n), rwsql: newRWStatements(n), rsql: newRecordStatements(n), ratesql: newRateStatements(n), sweep: sweep}
	s.lis = newListener(b, n.channel())
	s.lis.permits = n.permits
	s.lis.rw = n.rw
	return s, nil
}

// Model implements driver.Mutex: per-key leases of at least a millisecond
// on the database clock, kept in microseconds (timestamptz).
func (s *Store) Model() driver.Model {
	return driver.Model{MinTTL: time.Millisecond, Granularity: time.Microsecond, ServerClock: true}
}

// Retention is how long a key whose last holding ended (released or
// expired) may keep its row: the sweep interval. Negative when the store
// does not sweep.
func (s *Store) Retention() time.Duration {
	if s.sweep < 0 {
		return -1
	}
	return s.sweep
}

// Close stops the store's listener (its connection is closed; subscribers
// get no more values) and its sweep. Later Acquire, Extend, Release,
// Transfer and Subscribe, and the Semaphore's and the RateLimiter's calls, fail with an error
// matching driver.ErrInvalid before any I/O; Inspect, List, Sweep, Migrate and Doctor still work
// through the pool. It leaves the rows of held keys, which expire with
// their leases, and never closes the pool. It waits for the background
// work to end or ctx, whichever comes first, and returns ctx's error if
// ctx ended first, else nil. Calling it again does nothing and returns nil.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	stop, done := s.sweepStop, s.sweepDone
	s.mu.Unlock()
	if already {
		return nil
	}
	if stop != nil {
		stop()
	}
	s.lis.close()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.lis.wait(ctx)
}

// errClosed is returned by calls after Close.
func errClosed() error { return fmt.Errorf("%w: pgstore: store is closed", driver.ErrInvalid) }

// digest is what the table keeps of a token: its hex SHA-256.
func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// checkKey rejects what PostgreSQL's text cannot hold (a NUL byte) before
// any I/O; driver.ValidateKey has done the rest.
func checkKey(key string) error {
	if key == "" || strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("%w: pgstore: key is empty or holds a NUL byte, which PostgreSQL text cannot store", driver.ErrInvalid)
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: pgstore: ttl %v is below the minimum of 1ms", driver.ErrInvalid, ttl)
	}
	return nil
}

// micros is ttl in microseconds, rounded up.
func micros(ttl time.Duration) int64 { return int64((ttl + time.Microsecond - 1) / time.Microsecond) }

// Table returns the store's prefix (Options.Table, or DefaultTable).
func (s *Store) Table() string { return strings.TrimSuffix(s.names.locks, "_locks") }
