package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"example.com/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultSessionTTL is the session TTL when Options.SessionTTL is zero.
const DefaultSessionTTL = 10 * time.Second

// MinSessionTTL is the shortest session TTL accepted: etcd raises shorter
// lease TTLs to its minimum (1.5 election timeouts, 2 s by default), so a
// shorter one would not mean what it says.
const MinSessionTTL = 2 * time.Second

// Options configure a Store.
type Options struct {
	// Prefix is put in front of every lock name: lock N lives under the etcd
	// prefix Prefix+N+"/", where `etcdctl lock Prefix+N` also queues.
	Prefix string
	// SessionTTL is the TTL of the store's etcd lease, in whole seconds
	// (0: DefaultSessionTTL; at least MinSessionTTL).
	SessionTTL time.Duration
}

// Store is a driver.Mutex on etcd. It is safe for concurrent use. Create it
// with New; Close revokes its session.
type Store struct {
	cli    *clientv3.Client
	prefix string
	ttl    time.Duration

	mu       sync.Mutex
	sess     *session
	granting chan struct{} // closed when the grant under way ends; nil if none
	ka       *keepalive    // the keepalive under way, shared; nil if none
	held     map[string]holding
	// permits are the store's own semaphore holdings, filed under their
	// holdings prefix + token digest, for ReleasePermits' one round trip.
	permits map[string]permitKey
	// names are the etcd keys this store created in session namesOf and
	// has not seen deleted. A new holding or waiter takes the first free
	// name of its lock (see newName).
	names   map[string]bool
	namesOf clientv3.LeaseID
	// fresh makes newName return a new name every time (a test's
	// negative control: the per-holding names of before).
	fresh    bool
	freshSeq int
	// unguarded drops the revision guard of the lock family's admissions
	// (a test's negative control: two acquirers may then both get in).
	unguarded bool
	// beforeWatch, if set, is called by a queued waiter before it watches
	// its predecessor pred (a test's hook to order events around it).
	beforeWatch func(pred string)
	// waiting are the handles (ownKey) of the AcquireQueued calls under way.
	waiting map[string]bool
	closed  bool
}

// session is one etcd lease and how long it is certain to last.
type session struct {
	id      clientv3.LeaseID
	hex     string
	certain time.Time // send time of the last confirmed keepalive (or grant) + TTL
	dead    bool      // the server said the lease is gone
}

// holding is what the store knows of a holding it has: its etcd key,
// revisions for compare-and-set, the hold count and the fence. The store
// files it under a handle made of the session and the token's digest
// (ownKey); its etcd key is the name it was created with (newName), or for
// a holding that came by a transfer the one the previous holder queued
// with.
type holding struct {
	k           string // the etcd key
	lease       clientv3.LeaseID
	create, mod int64
	holds       int
	fence       int64  // the holding's fence (see fenceOf; a queued holder's is its confirming read's revision)
	vfence      int64  // the fence written in the value (a transferred holding), else 0
	token       string // for Inspect of our own holdings
	meta        string // the holder metadata in the value, kept by every rewrite
}

// holdingOf is the holding at kv of token with holds, as the key tells it.
func holdingOf(kv *mvccpb.KeyValue, holds int, token string) holding {
	v, _ := parseValue(kv.Value)
	return holding{k: string(kv.Key), lease: clientv3.LeaseID(kv.Lease), create: kv.CreateRevision, mod: kv.ModRevision,
		holds: holds, fence: fenceOf(kv), vfence: v.fence, token: token, meta: v.meta}
}

var (
	_ driver.Mutex         = (*Store)(nil)
	_ driver.BatchExtender = (*Store)(nil)
	_ driver.Queuer        = (*Store)(nil)
	_ driver.Transferer    = (*Store)(nil)
	_ driver.Atomic        = (*Store)(nil)
	_ driver.QueueReader   = (*Store)(nil)
	_ driver.Inspector     = (*Store)(nil)
	_ driver.Lister        = (*Store)(nil)
	_ driver.WaiterCounter = (*Store)(nil)
	_ driver.Doctor        = (*Store)(nil)
)

// New returns a Store using cli, which it never closes. It returns an error
// matching driver.ErrInvalid if cli is nil or SessionTTL is below
// MinSessionTTL or not whole seconds. It does no I/O: the session is created
// on first use.
func New(cli *clientv3.Client, opts Options) (*Store, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: etcdstore: nil client", driver.ErrInvalid)
	}
	ttl := opts.SessionTTL
	if ttl == 0 {
		ttl = DefaultSessionTTL
	}
	if ttl < MinSessionTTL || ttl%time.Second != 0 {
		return nil, fmt.Errorf("%w: etcdstore: session TTL %v must be whole seconds and at least %v", driver.ErrInvalid, ttl, MinSessionTTL)
	}
	return &Store{cli: cli, prefix: opts.Prefix, ttl: ttl, held: map[string]holding{}}, nil
}

// Model implements driver.Mutex: session-based, whole seconds, server clock.
func (s *Store) Model() driver.Model {
	return driver.Model{Granularity: time.Second, ServerClock: true, Session: true, SessionTTL: s.ttl}
}

// Client returns the etcd client the store uses.
func (s *Store) Client() *clientv3.Client { return s.cli }

// SessionTTL returns the session's TTL.
func (s *Store) SessionTTL() time.Duration { return s.ttl }

// Close revokes the store's session, which deletes every key it holds or
// waits with. Later calls that need a session (Acquire, AcquireQueued,
// AcquireQueuedRead, and Apply's Acquire) fail with an error matching
// driver.ErrInvalid before writing anything; Extend, Release and Transfer
// then find the store's holdings gone and return driver.NotHeld; KeepAlive
// returns 0 and no error (no session). It does not close the etcd client.
// If the revoke fails the keys expire with the session's TTL; the error
// says so. Calling it again does nothing and returns nil.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	sess := s.sess
	s.closed, s.sess = true, nil
	clear(s.held)
	clear(s.permits)
	s.mu.Unlock()
	if sess == nil || sess.dead || s.cli.Ctx().Err() != nil { // nothing to revoke, or the client is closed
		return nil
	}
	if _, err := s.cli.Revoke(ctx, sess.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("etcdstore: revoke session (its keys expire within %v): %w", s.ttl, err)
	}
	return nil
}

// pfx is the etcd prefix of lock name key.
func (s *Store) pfx(key string) string { return s.prefix + key + "/" }

// ownKey is the handle under which the store files the holding on key in
// sess of the token with digest dig (held). It is not an etcd key: see
// newName.
func (s *Store) ownKey(sess *session, key, dig string) string {
	return s.pfx(key) + sess.hex + "_" + dig[:24]
}

// current returns the session if it is alive as far as the store knows,
// else nil.
func (s *Store) current(now time.Time) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil || s.sess.dead || !now.Before(s.sess.certain) {
		return nil
	}
	return s.sess
}

// session returns a session certain to last at least half its TTL from now:
// the current one, renewed with a keepalive if needed, or a new one.
func (s *Store) session(ctx context.Context) (*session, error) {
	for range 3 {
		now := time.Now()
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("%w: etcdstore: store closed", driver.ErrInvalid)
		}
		sess := s.sess
		s.mu.Unlock()
		if sess != nil && !sess.dead && sess.certain.Sub(now) >= s.ttl/2 {
			return sess, nil
		}
		if sess != nil && !sess.dead && now.Before(sess.certain) {
			if err := s.keepAlive(ctx, sess); err == nil {
				return sess, nil
			} else if !errors.Is(err, errSessionGone) {
				return nil, err
			}
		}
		if err := s.grant(ctx, sess); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("etcdstore: no session after 3 attempts")
}

// grant replaces old (nil, expired or gone) with a new session, unless
// another call did already; one grant at a time. The old lease is revoked
// first, best effort, so that keys it may still hold on the server are freed
// now rather than at its expiry.
func (s *Store) grant(ctx context.Context, old *session) error {
	s.mu.Lock()
	for s.granting != nil {
		ch := s.granting
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
	}
	if s.sess != old { // replaced meanwhile
		s.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	s.granting = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.granting = nil
		close(ch)
		s.mu.Unlock()
	}()
	if old != nil && !old.dead {
		_, _ = s.cli.Revoke(ctx, old.id) // best effort: it expires anyway
	}
	sent := time.Now()
	resp, err := s.cli.Grant(ctx, int64(s.ttl/time.Second))
	if err != nil {
		return fmt.Errorf("etcdstore: create session: %w", authRefused(err))
	}
	sess := &session{id: resp.ID, hex: strconv.FormatInt(int64(resp.ID), 16), certain: sent.Add(s.ttl)}
	s.mu.Lock()
	if old != nil {
		old.dead = true
	}
	s.sess = sess
	clear(s.held)
	clear(s.permits)
	s.mu.Unlock()
	return nil
}

// authRefused marks err as driver.ErrRefused when etcd refused the
// client's identity or its permissions: no user name on a cluster with
// authentication enabled, a user or password it rejects, or a role without
// access to the lock's prefix. Retrying cannot fix those, so a wait ends
// at once. Other errors are returned as they are.
func authRefused(err error) error {
	for _, e := range []error{rpctypes.ErrUserEmpty, rpctypes.ErrAuthFailed, rpctypes.ErrPermissionDenied, rpctypes.ErrUserNotFound} {
		if errors.Is(err, e) && !errors.Is(err, driver.ErrRefused) {
			return fmt.Errorf("%w: %w", driver.ErrRefused, err)
		}
	}
	return err
}

// errSessionGone reports that the server no longer has the session's lease.
var errSessionGone = errors.New("etcdstore: session expired")

// keepalive is one keepalive under way, shared by concurrent callers.
type keepalive struct {
	done chan struct{}
	err  error
}

// keepAlive renews sess with one keepalive, or waits for the one under way.
// It returns errSessionGone (and marks sess dead) if the server says the
// lease is gone; other errors leave the outcome unknown.
func (s *Store) keepAlive(ctx context.Context, sess *session) error {
	s.mu.Lock()
	if ka := s.ka; ka != nil {
		s.mu.Unlock()
		select {
		case <-ka.done:
			return ka.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ka := &keepalive{done: make(chan struct{})}
	s.ka = ka
	s.mu.Unlock()

	sent := time.Now()
	resp, err := s.cli.KeepAliveOnce(ctx, sess.id)
	s.mu.Lock()
	switch {
	case err == nil && resp.TTL > 0:
		if c := sent.Add(s.ttl); c.After(sess.certain) {
			sess.certain = c
		}
	case err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound):
		s.markDeadLocked(sess)
		err = errSessionGone
	default:
		err = fmt.Errorf("etcdstore: keepalive: %w", err)
	}
	ka.err = err
	s.ka = nil
	close(ka.done)
	s.mu.Unlock()
	return err
}

// markDeadLocked records that the server no longer has sess: every holding
// in it is gone. Called with s.mu held.
func (s *Store) markDeadLocked(sess *session) {
	sess.dead = true
	for k, h := range s.held {
		if h.lease == sess.id {
			delete(s.held, k)
		}
	}
	clear(s.permits) // a cache: ReleasePermits reads what it lacks
}

// certainTTL is how long sess is certain to last counted from start, at
// most the session TTL (a keepalive sent after start makes it a little
// longer; reporting the TTL is the simpler promise).
func (s *Store) certainTTL(sess *session, start time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return min(sess.certain.Sub(start), s.ttl)
}

// remember records h, a holding of the current session, under the
// token's key name k, and returns its fence: a fence known for the same
// holding (same etcd key and CreateRevision) is kept if greater, since a
// read of the key cannot tell a queued holder's fence. forget drops it.
func (s *Store) remember(k string, h holding) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.held[k]; ok && old.k == h.k && old.create == h.create {
		h.fence = max(h.fence, old.fence)
	}
	if k != "" && s.sess != nil && !s.sess.dead && s.sess.id == h.lease {
		s.held[k] = h
	}
	return h.fence
}

func (s *Store) forget(k string) {
	s.mu.Lock()
	delete(s.held, k)
	s.mu.Unlock()
}

func (s *Store) lookup(k string) (holding, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[k]
	return h, ok
}

// Prefix returns Options.Prefix.
func (s *Store) Prefix() string { return s.prefix }

// KeepAlive implements driver.SessionKeeper: it renews the store's session
// (its etcd lease) with one keepalive, shared with concurrent ones and with
// Extend's, so every holding of the store lasts the session's TTL from the
// start of the call. It is for callers that hold keys through the store
// without a dlock Client renewing them (the Client's Extend renews the
// same session). Without a session it does nothing and returns nil. If the
// server no longer has the session it returns driver.NotHeld(false): every
// holding of the store is lost.
func (s *Store) KeepAlive(ctx context.Context) error {
	sess := s.live()
	if sess == nil {
		return nil
	}
	err := s.keepAlive(ctx, sess)
	if errors.Is(err, errSessionGone) {
		return driver.NotHeld(false)
	}
	return err
}
