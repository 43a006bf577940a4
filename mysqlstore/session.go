package mysqlstore

import (
	"crypto/sha256"
	"database/sql"
	"encoding/base32"
	"errors"
	"fmt"
	"sync"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/sqlsession"
)

// SessionOptions configure the session lock (NewSession).
type SessionOptions struct {
	// Table is the schema prefix (the fence sequence <Table>_fence, and the
	// prefix of lock names): empty means "dlock".
	Table string
	// LocksPerConn is how many keys one pinned connection holds at most
	// (MariaDB 10.0.2+ and MySQL 5.7+ allow several named locks per
	// connection); 0 means 16.
	LocksPerConn int
	// MaxConns bounds the connections the store pins at once: holding
	// connections plus one per waiting AcquireQueued. Beyond it Acquire
	// returns ErrConnLimit instead of exhausting the pool; 0 means 8. Keep
	// it below the pool's SetMaxOpenConns, leaving room for the rest of
	// the application.
	MaxConns int
	// CheckInterval is the Model's SessionTTL, as pgstore's: how often a
	// dlock Client renews (Extend pings each holding's connection), so a
	// lost connection is noticed within it. 0 means 5s.
	CheckInterval time.Duration
	// Deprecated: CheckEvery is CheckInterval's old name, used when
	// CheckInterval is zero.
	CheckEvery time.Duration
	// ConnWait bounds how long the store waits for a connection when every
	// connection of the pool (SetMaxOpenConns) is in use before it fails
	// with ErrPoolExhausted, as pgstore's (0 means 1s). When the pool has
	// room, opening a new connection may take up to 10 s.
	ConnWait time.Duration
}

// ErrPoolExhausted means the store needed a connection from the pool and
// the pool gave none within SessionOptions.ConnWait: every connection is in
// use (by the application, or pinned by session locks). It matches
// driver.ErrUnavailable: a later attempt may succeed. The call changed
// nothing.
var ErrPoolExhausted = fmt.Errorf("%w: mysqlstore: the connection pool is exhausted", driver.ErrUnavailable)

// connectWait bounds the wait for a new connection when the pool has room.
const connectWait = 10 * time.Second

// ErrConnLimit is returned by Session.Acquire and AcquireQueued when taking
// the key would pin more than SessionOptions.MaxConns connections. It
// matches driver.ErrUnavailable: a later attempt may succeed (it clears when
// holdings are released; a dlock Client waits with its backoff). The call
// changed nothing.
var ErrConnLimit = fmt.Errorf("%w: mysqlstore: session lock: connection limit reached (SessionOptions.MaxConns)", driver.ErrUnavailable)

// infinite is GET_LOCK's longest timeout: MariaDB rejects -1.
const infinite = 0xFFFFFFFF

// SessionStore is the session lock: GET_LOCK and RELEASE_LOCK on connections it
// pins from the caller's pool. A holding lives as long as its connection;
// no TTL. Tokens are tracked in the process (GET_LOCK knows connections,
// not tokens): another token of the same Session asking for a key the
// Session holds is answered by asking the holder's connection whether it
// still holds the lock (IS_USED_LOCK), without a GET_LOCK of its own. It is
// safe for concurrent use, but its calls run one at a time
// (a call holds the Session's lock for its round trip; AcquireQueued
// waits outside it): use several Sessions for parallel acquisitions.
// Close releases everything.
type SessionStore struct {
	db     *sql.DB
	fence  string
	prefix string
	opts   SessionOptions
	eng    *sqlsession.Engine[*conn, string] // a key's lock is its LockName

	mu sync.Mutex // one call at a time
}

// Session is SessionStore's old name.
//
// Deprecated: use SessionStore (the name pgstore uses).
type Session = SessionStore

// conn is a pinned connection (sqlsession.Pins counts the keys on it).
type conn struct {
	*sql.Conn
	id   int64     // CONNECTION_ID(), for KILL QUERY
	once sync.Once // discard
}

type pinned = sqlsession.Conn[*conn]

// NewSession returns a session lock on db. It does no I/O (the fence
// sequence must exist: Migrate) and never closes db. Bad options return
// driver.ErrInvalid.
func NewSession(db *sql.DB, opts SessionOptions) (*SessionStore, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: mysqlstore: nil *sql.DB", driver.ErrInvalid)
	}
	n, err := tableNames(opts.Table)
	if err != nil {
		return nil, err
	}
	if opts.CheckInterval == 0 {
		opts.CheckInterval = opts.CheckEvery
	}
	if opts.LocksPerConn < 0 || opts.MaxConns < 0 || opts.CheckInterval < 0 || opts.ConnWait < 0 {
		return nil, fmt.Errorf("%w: mysqlstore: negative SessionOptions", driver.ErrInvalid)
	}
	if opts.LocksPerConn == 0 {
		opts.LocksPerConn = 16
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = 8
	}
	if opts.CheckInterval == 0 {
		opts.CheckInterval = 5 * time.Second
	}
	if opts.ConnWait == 0 {
		opts.ConnWait = time.Second
	}
	opts.CheckEvery = opts.CheckInterval
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	s := &Session{db: db, fence: n.fence, prefix: opts.Table + ":", opts: opts}
	pins := sqlsession.New(sqlsession.Config{
		MaxConns: opts.MaxConns, MaxWaiting: opts.MaxConns, PerConn: opts.LocksPerConn,
		Timeout: callTimeout, ErrLimit: ErrConnLimit, ErrClosed: errClosed,
	}, sqlsession.Hooks[*conn]{
		Open: s.open,
		Drop: discard, // never back into the pool (see discard)
		Kill: discard,
		// Any error leaves a pinned connection in doubt: it is discarded,
		// and the server releases its locks.
		Broken: func(*conn, error) bool { return true },
		Busy:   func(err error) bool { return errors.Is(err, ErrPoolExhausted) },
	})
	s.eng = sqlsession.NewEngine(pins, sqlsession.Options{
		Name: "mysqlstore", TTL: opts.CheckInterval, ErrClosed: errClosed,
	}, s.dialect())
	return s, nil
}

// Model implements driver.Mutex: a session store whose session is each
// holding's connection, checked every CheckInterval.
func (s *SessionStore) Model() driver.Model {
	return driver.Model{Session: true, SessionTTL: s.opts.CheckInterval, ServerClock: true}
}

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// LockName returns the GET_LOCK name of key (table empty: DefaultTable):
// "<Table>:<key>" when that fits in 64 characters and key uses only a-z 0-9
// . _ - / :, else "#" and the lower-case base32 of SHA-256("<Table>:<key>")
// (53 characters). Hashing
// sidesteps the 64-character limit and case: MySQL compares lock names
// case-insensitively (MariaDB 10.11 was measured case-sensitive), so "A"
// and "a" must not share a name.
func LockName(table, key string) string {
	if table == "" {
		table = DefaultTable
	}
	name := table + ":" + key
	if len(name) <= 64 && plain(key) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "#" + lower(b32.EncodeToString(sum[:]))
}

func plain(key string) bool {
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/' || c == ':') {
			return false
		}
	}
	return true
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
