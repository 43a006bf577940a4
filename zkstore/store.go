package zkstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"example.com/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// DefaultRoot is the path under which lock names live when Options.Root is
// empty.
const DefaultRoot = "/dlock"

// DefaultRWRoot is the path under which read-write lock names live when
// Options.RWRoot is empty: apart from the mutexes', so that the two are
// namespaces of their own.
const DefaultRWRoot = "/dlock-rw"

// DefaultSemRoot is the path under which semaphore names live when
// Options.SemRoot is empty.
const DefaultSemRoot = "/dlock-sem"

// DefaultSessionTimeout is the session timeout Dial asks for when
// Options.SessionTimeout is zero.
const DefaultSessionTimeout = 10 * time.Second

// Options configure a Store.
type Options struct {
	// Root is the absolute ZooKeeper path under which lock name N lives, at
	// Root/N (DefaultRoot if empty). A Curator InterProcessMutex on
	// Root/N takes the same lock.
	Root string
	// RWRoot is the absolute ZooKeeper path under which read-write lock
	// name N lives, at RWRoot/N (DefaultRWRoot if empty). A Curator
	// InterProcessReadWriteLock on RWRoot/N takes the same lock.
	RWRoot string
	// SemRoot is the absolute ZooKeeper path under which semaphore name N
	// lives, at SemRoot/N (DefaultSemRoot if empty). A Curator
	// InterProcessSemaphoreV2 on SemRoot/N shares its leases.
	SemRoot string
	// Prefix is put in front of every lock name (lock N lives at
	// Root/Prefix+N), as the CLI's --prefix does.
	Prefix string
	// SessionTimeout is the session timeout the conn was connected with
	// (New), or the one to ask for (Dial; 0: DefaultSessionTimeout). The
	// server may grant another: New counts with Negotiated's value when it
	// is given, else with SessionTimeout, which must then not exceed what
	// the server grants (Store.Doctor checks).
	SessionTimeout time.Duration
	// Negotiated, if set, is the Negotiated whose Dial the conn was
	// connected with: the store then counts with the timeout the server
	// granted. Dial sets it.
	Negotiated *Negotiated
	// Servers lists the ensemble's client addresses (host:port), for Doctor
	// only: it asks each for its version and mode. Dial sets it.
	Servers []string
	// Margin is subtracted from the session timeout when the store says how
	// long its session is certain to last (0: a quarter of the timeout,
	// which covers a follower that confirmed a request and failed before
	// telling the leader, up to half a tickTime with tickTime at most half
	// the timeout). It must be less than half the timeout.
	Margin time.Duration
	// ACL is the ACL of every node the store creates: its lock nodes and
	// the parents it creates. Empty means open (world:anyone, every
	// permission), Curator's default. zk.AuthACL(zk.PermAll) limits a node
	// to the identities the creating session authenticated as (with
	// digest auth: the user name and password), which other processes
	// that lock the same path (Curator's included) must then share, since
	// a waiter reads its predecessor's node.
	ACL []zk.ACL
	// Auth is for Dial only: credentials added to the session once it is
	// established (zk.Conn.AddAuth; go-zookeeper sends them again after a
	// reconnection), such as {Scheme: "digest", Secret: []byte("user:password")}.
	// New refuses it (driver.ErrInvalid): add them to your conn yourself.
	Auth []Auth
}

// Auth is one credential for Options.Auth: a ZooKeeper authentication
// scheme ("digest": Secret is "user:password") and its secret.
type Auth struct {
	// Scheme is the ZooKeeper authentication scheme, such as "digest".
	Scheme string
	// Secret is the scheme's credential ("user:password" for digest).
	Secret []byte
}

// Store is a driver.Mutex on ZooKeeper with Curator's InterProcessMutex
// layout. It is safe for concurrent use. All its holdings live in the
// session of its zk.Conn.
type Store struct {
	conn    *zk.Conn
	owned   bool     // Dial made conn: Close closes it
	acl     []zk.ACL // of every node the store creates
	root    string
	rwRoot  string
	semRoot string
	timeout time.Duration // the session timeout the Model declares
	asked   time.Duration
	neg     *Negotiated
	margin  time.Duration
	servers []string
	prefix  string

	mu     sync.Mutex
	sess   session
	held   map[string]*holding // by lock name
	closed bool
	ext    map[string]*flight         // Extends under way, by node path
	orphan map[string]map[string]bool // lock path → UUIDs of creates whose outcome is unknown
	rw     map[rwKey]*rwHolding       // read-write lock nodes of this store, by name and token
	sem    map[rwKey]*semHolding      // semaphore leases of this store, by name and token

	createFirst  bool         // tests only: Acquire creates without listing first (the variant measured against)
	unprotected  bool         // tests only: retry a create that lost its connection without looking (naive)
	statCreate   bool         // tests only: stat every node after its create (the request the store no longer sends)
	existsWatch  bool         // tests only: a waiter watches its predecessor with exists (which data changes fire too)
	looseNames   bool         // tests only: every child with "lock-" is a participant and no name is refused (the old rule)
	rwHerd       bool         // tests only: read-write waiters watch the whole lock path (a herd)
	semOwnOnly   bool         // tests only: count only dlock's leases (Curator's ignored)
	seqDowngrade bool         // tests only: a downgrade's reader's node gets a new sequence (Curator 5.4's CURATOR-621)
	syncs        atomic.Int64 // syncs sent (tests count them)
	reqs         atomic.Int64 // requests sent (tests count them)
}

// session is the ZooKeeper session the store last saw confirmed.
type session struct {
	id      int64
	certain time.Time // send time of the last confirmed request + timeout - margin
}

// holding is what the store knows of a lock node it created: its path,
// session, fence, data version and hold count.
type holding struct {
	path    string
	sid     int64
	czxid   int64 // the node's czxid, 0 if not read (a fresh grant does not read it); a transfer keeps it
	fence   int64 // grantFence's, or the mzxid of the transfer that made the holding
	version int32
	holds   int
	token   string // for Inspect of our own holdings
	meta    string // the holder metadata in the node's data, kept by every setData
}

var (
	_ driver.Mutex          = (*Store)(nil)
	_ driver.BatchExtender  = (*Store)(nil)
	_ driver.Queuer         = (*Store)(nil)
	_ driver.Inspector      = (*Store)(nil)
	_ driver.Lister         = (*Store)(nil)
	_ driver.MetaKeeper     = (*Store)(nil)
	_ driver.WaiterCounter  = (*Store)(nil)
	_ driver.Doctor         = (*Store)(nil)
	_ driver.RWMutex        = (*Store)(nil)
	_ driver.RWNotifier     = (*Store)(nil)
	_ driver.Semaphore      = (*Store)(nil)
	_ driver.PermitNotifier = (*Store)(nil)
)

// New returns a Store using conn, which it never closes. It returns an
// error matching driver.ErrInvalid if conn is nil, Root is not an absolute
// ZooKeeper path, the session timeout is unknown (neither SessionTimeout
// nor a connected Negotiated) or Margin is out of range. It does no I/O.
func New(conn *zk.Conn, opts Options) (*Store, error) {
	if conn == nil {
		return nil, fmt.Errorf("%w: zkstore: nil conn", driver.ErrInvalid)
	}
	if len(opts.Auth) > 0 {
		return nil, fmt.Errorf("%w: zkstore: Options.Auth is for Dial: add credentials to your own conn with AddAuth", driver.ErrInvalid)
	}
	acl := opts.ACL
	if len(acl) == 0 {
		acl = openACL
	}
	root, err := cleanRoot(opts.Root)
	if err != nil {
		return nil, err
	}
	rwRoot, semRoot := DefaultRWRoot, DefaultSemRoot
	if opts.RWRoot != "" {
		if rwRoot, err = cleanRoot(opts.RWRoot); err != nil {
			return nil, err
		}
	}
	if opts.SemRoot != "" {
		if semRoot, err = cleanRoot(opts.SemRoot); err != nil {
			return nil, err
		}
	}
	timeout := opts.SessionTimeout
	if opts.Negotiated != nil {
		if got, _ := opts.Negotiated.Timeout(); got > 0 {
			timeout = got
		}
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("%w: zkstore: the session timeout is unknown: set Options.SessionTimeout to the one the conn was connected with", driver.ErrInvalid)
	}
	margin := opts.Margin
	if margin == 0 {
		margin = timeout / 4
	}
	if margin < 0 || margin >= timeout/2 {
		return nil, fmt.Errorf("%w: zkstore: margin %v must be in [0, %v)", driver.ErrInvalid, margin, timeout/2)
	}
	return &Store{conn: conn, acl: acl, root: root, rwRoot: rwRoot, rw: map[rwKey]*rwHolding{}, semRoot: semRoot, sem: map[rwKey]*semHolding{}, timeout: timeout, asked: opts.SessionTimeout, neg: opts.Negotiated,
		margin: margin, servers: opts.Servers, prefix: opts.Prefix, held: map[string]*holding{}, ext: map[string]*flight{}, orphan: map[string]map[string]bool{}}, nil
}

// cleanRoot checks and normalises Options.Root.
func cleanRoot(root string) (string, error) {
	if root == "" {
		return DefaultRoot, nil
	}
	root = strings.TrimRight(root, "/")
	if root == "" || !strings.HasPrefix(root, "/") || strings.Contains(root, "//") {
		return "", fmt.Errorf("%w: zkstore: root %q is not an absolute ZooKeeper path", driver.ErrInvalid, root)
	}
	for _, seg := range strings.Split(root[1:], "/") {
		if seg == "." || seg == ".." || escapeSegment(seg) != seg {
			return "", fmt.Errorf("%w: zkstore: root %q is not a valid ZooKeeper path", driver.ErrInvalid, root)
		}
	}
	return root, nil
}

// Dial connects to the ZooKeeper servers (host:port each), waits until the
// connection has a session or ctx ends, and returns a Store that owns the
// conn (Close closes it). The session timeout is the one the server
// grants. Errors: driver.ErrInvalid for bad options (as New), or the
// connection's error.
func Dial(ctx context.Context, servers []string, opts Options) (*Store, error) {
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	for _, r := range []string{opts.Root, opts.RWRoot, opts.SemRoot} {
		if _, err := cleanRoot(r); err != nil {
			return nil, err
		}
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: zkstore: no servers", driver.ErrInvalid)
	}
	neg := &Negotiated{}
	conn, events, err := zk.Connect(servers, opts.SessionTimeout, zk.WithDialer(neg.Dial), zk.WithLogger(quiet{}))
	if err != nil {
		return nil, fmt.Errorf("zkstore: connect: %w", err)
	}
	if err := awaitSession(ctx, conn, events); err != nil {
		conn.Close()
		return nil, err
	}
	for _, a := range opts.Auth {
		if err := conn.AddAuth(a.Scheme, a.Secret); err != nil {
			conn.Close()
			return nil, fmt.Errorf("%w: zkstore: authenticate with scheme %q: %v", driver.ErrRefused, a.Scheme, err)
		}
	}
	opts.Auth = nil // applied: New takes the conn as it is
	opts.Negotiated, opts.Servers = neg, servers
	s, err := New(conn, opts)
	if err != nil {
		conn.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// awaitSession waits for the first StateHasSession event (the events after
// it go unread: go-zookeeper drops events nobody reads).
func awaitSession(ctx context.Context, conn *zk.Conn, events <-chan zk.Event) error {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return fmt.Errorf("zkstore: connect: connection closed")
			}
			if ev.State == zk.StateHasSession {
				return nil
			}
			if ev.State == zk.StateAuthFailed {
				return fmt.Errorf("%w: zkstore: connect: authentication failed", driver.ErrRefused)
			}
		case <-ctx.Done():
			return fmt.Errorf("zkstore: connect to %s: no session: %w", conn.Server(), context.Cause(ctx))
		}
	}
}

// quiet drops go-zookeeper's log lines (reconnection chatter); the store
// reports what matters through its errors.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// Close forgets the store's holdings and makes later calls fail with
// driver.ErrInvalid. If the store was made by Dial it closes the conn,
// which ends the session and so deletes every lock node of the store at
// once; a conn passed to New stays open and its nodes stay until they are
// released or the session ends.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	clear(s.held)
	clear(s.rw)
	clear(s.sem)
	s.mu.Unlock()
	if s.owned {
		s.conn.Close()
	}
	return nil
}

// Conn returns the conn the store uses.
func (s *Store) Conn() *zk.Conn { return s.conn }

// Root returns the store's root path.
func (s *Store) Root() string { return s.root }

// RWRoot returns the root path of the store's read-write locks.
func (s *Store) RWRoot() string { return s.rwRoot }

// SemRoot returns the root path of the store's semaphores.
func (s *Store) SemRoot() string { return s.semRoot }

// SessionTimeout returns the session timeout the store counts with.
func (s *Store) SessionTimeout() time.Duration { return s.timeout }

// Model implements driver.Mutex: session-based, server clock; the
// session's TTL is its timeout.
func (s *Store) Model() driver.Model {
	return driver.Model{ServerClock: true, Session: true, SessionTTL: s.timeout}
}

// errClosed is returned by calls on a closed store.
var errClosed = fmt.Errorf("%w: zkstore: store closed", driver.ErrInvalid)

// lookup returns the store's holding of key by the token with digest dig in
// the conn's current session, dropping one of an older session (lost).
// data is h's node data with holds holds (the fence written out if it is
// not the czxid, or the czxid is unknown).
func (h *holding) data(holds int) []byte {
	f := ""
	if h.fence != h.czxid {
		f = strconv.FormatInt(h.fence, 10)
	}
	return nodeData(holds, digest(h.token), f, h.meta)
}

func (s *Store) lookup(key, token string) (*holding, bool) {
	sid := s.conn.SessionID()
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[key]
	if !ok || h.token != token {
		return nil, false
	}
	if h.sid != sid {
		delete(s.held, key)
		return nil, false
	}
	c := *h
	return &c, true
}

func (s *Store) remember(key string, h *holding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.held[key] = h
	}
}

func (s *Store) forget(key string, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.held[key]; ok && (path == "" || h.path == path) {
		delete(s.held, key)
	}
}

// lockPath is the ZooKeeper path of lock name key.
func (s *Store) lockPath(key string) string { return s.root + "/" + encodeKey(s.prefix+key) }

// wrapErr names the call and maps go-zookeeper's errors: ErrNoAuth and
// ErrInvalidACL to driver.ErrRefused; others (connection failures) stay
// unknown outcomes.
func wrapErr(op, key string, err error) error {
	if errors.Is(err, zk.ErrNoAuth) || errors.Is(err, zk.ErrInvalidACL) || errors.Is(err, zk.ErrAuthFailed) {
		return fmt.Errorf("%w: zkstore: %s %q: %w", driver.ErrRefused, op, key, err)
	}
	return fmt.Errorf("zkstore: %s %q: %w", op, key, err)
}
