package mysqlstore

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"fmt"
	"math"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/sqlsession"
)

// callTimeout bounds a statement on a pinned connection. Pinned
// connections never see the caller's cancellation: go-sql-driver closes a
// connection whose query is cancelled, which would drop every lock on it.
const callTimeout = 10 * time.Second

// detached returns a context for a statement on a pinned connection: not
// cancelled with ctx, bounded by callTimeout.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
}

// call runs q on pc's connection (sqlsession.Pins.Run) and scans one row
// into dest. The statement itself is not cancelled with ctx (that would
// close the connection and drop its locks); when ctx ends first, call
// returns ctx's error at once and the statement finishes in the
// background, bounded by callTimeout, after which late, if not nil, gets
// its outcome (in a goroutine of its own). A statement's error discards the
// connection (its locks are lost) and wraps sqlsession.ErrConnDead. dest
// must not be read after an error.
func (s *SessionStore) call(ctx context.Context, pc *pinned, late func(error), q string, args []any, dest ...any) error {
	var l sqlsession.Late[*conn]
	if late != nil {
		l = func(_ context.Context, _ *conn, _ any, err error) { go late(err) }
	}
	_, err := s.pins.Run(ctx, pc, func(ctx context.Context, c *conn) (any, error) {
		return nil, c.QueryRowContext(ctx, q, args...).Scan(dest...)
	}, l)
	return err
}

func (s *SessionStore) grant(h *holding) driver.Grant {
	return driver.Grant{Fence: h.fence, Holds: h.holds, TTL: s.opts.CheckInterval}
}

// errClosed is returned by every call after Close.
var errClosed = fmt.Errorf("%w: mysqlstore: session lock closed", driver.ErrInvalid)

// stillHeld asks h's connection whether it still holds h's lock. An error
// (ctx ended, the connection broke) is returned as is: no answer.
func (s *SessionStore) stillHeld(ctx context.Context, h *holding) (bool, error) {
	var mine int
	err := s.call(ctx, h.pc, nil, "SELECT COALESCE(IS_USED_LOCK(?) = CONNECTION_ID(), 0)", []any{h.name}, &mine)
	if err != nil {
		if ctx.Err() == nil {
			s.lose(h.pc) // the connection is gone, and with it its locks
		}
		return false, err
	}
	if mine != 1 {
		s.forget(h)
	}
	return mine == 1, nil
}

// usedElsewhere reports whether some connection holds key's lock, asked
// on any pooled connection (for a key this Session does not hold).
func (s *SessionStore) usedElsewhere(ctx context.Context, key string) (bool, error) {
	var used sql.NullInt64
	if err := s.db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", LockName(s.opts.Table, key)).Scan(&used); err != nil {
		return false, wrap("session", err)
	}
	return used.Valid, nil
}

// Acquire takes key with GET_LOCK(name, 0) on a pinned connection (one
// round trip, two when a connection is pinned first), or re-enters (no
// I/O). The ttl is ignored: the holding lasts as long as the connection.
// Another holder gives a *driver.ContendedError with Remaining -1
// (unknown); when that holder is another token of this Session, its
// connection is asked first, so the answer is never stale. The pin limit
// gives ErrConnLimit; when ctx ends first, a lock granted late is
// released.
func (s *SessionStore) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := checkArgs(key, token, 0, false); err != nil {
		return driver.Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return driver.Grant{}, errClosed
	}
	if h := s.held[key]; h != nil {
		if h.token == token {
			h.holds++
			return s.grant(h), nil
		}
		held, err := s.stillHeld(ctx, h)
		if err != nil {
			return driver.Grant{}, wrap("session acquire", err)
		}
		if held {
			return driver.Grant{}, &driver.ContendedError{Remaining: -1}
		}
	}
	pc, err := s.pins.Pick(ctx)
	if err != nil {
		return driver.Grant{}, err
	}
	defer s.pins.Unuse(pc) // gives pc up if it holds nothing
	name := LockName(s.opts.Table, key)
	v, err := s.pins.Run(ctx, pc, func(ctx context.Context, c *conn) (any, error) {
		var fence uint64
		err := c.QueryRowContext(ctx, "SELECT IF(GET_LOCK(?, 0) = 1, NEXTVAL("+s.fence+"), 0)", name).Scan(&fence)
		return fence, err
	}, func(ctx context.Context, c *conn, v any, err error) {
		if err == nil && v.(uint64) > 0 { // granted after the caller left: undo
			_, _ = c.ExecContext(ctx, "DO RELEASE_LOCK(?)", name)
		}
	})
	if err != nil {
		if ctx.Err() == nil {
			s.lose(pc)
		}
		return driver.Grant{}, wrap("session acquire", err)
	}
	fence := v.(uint64)
	if fence == 0 {
		return driver.Grant{}, &driver.ContendedError{Remaining: -1}
	}
	h := &holding{token: token, name: name, fence: fence, holds: 1, pc: pc}
	s.pins.AddLock(pc)
	s.held[key] = h
	return s.grant(h), nil
}

// open takes a connection from the pool and learns its id.
// It waits for the pool within ConnWait (up to connectWait when the pool
// has room), else ErrPoolExhausted.
func (s *SessionStore) open(ctx context.Context) (*conn, error) {
	limit := s.opts.ConnWait
	if st := s.db.Stats(); st.MaxOpenConnections == 0 || st.InUse < st.MaxOpenConnections {
		limit = max(limit, connectWait)
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	c, err := s.db.Conn(cctx)
	cancel()
	if err != nil {
		if st := s.db.Stats(); ctx.Err() == nil && cctx.Err() != nil && st.MaxOpenConnections > 0 && st.InUse >= st.MaxOpenConnections {
			return nil, fmt.Errorf("%w: no connection within %v (SetMaxOpenConns %d, %d in use)", ErrPoolExhausted, limit, st.MaxOpenConnections, st.InUse)
		}
		return nil, wrap("session: pin a connection", err)
	}
	pc := &conn{Conn: c}
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&pc.id); err != nil {
		_ = c.Raw(func(any) error { return sqldriver.ErrBadConn })
		_ = c.Close()
		return nil, wrap("session: pin a connection", err)
	}
	return pc, nil
}

// discard closes pc's connection for good (not back into the pool, where
// another user would inherit its locks): the server then releases every
// lock it held.
//
// It waits for a statement still running on pc (bounded by callTimeout)
// in the background.
func discard(pc *pinned) {
	go pc.C.once.Do(func() {
		_ = pc.Hold(context.Background())
		defer pc.Unhold()
		_ = pc.C.Raw(func(any) error { return sqldriver.ErrBadConn })
		_ = pc.C.Close()
	})
}

// lose forgets every key held on pc and discards it (its connection died
// or answered wrongly). Called with s.mu.
func (s *SessionStore) lose(pc *pinned) {
	for k, h := range s.held {
		if h.pc == pc {
			delete(s.held, k)
		}
	}
	s.pins.Kill(pc)
}

// notHeld answers Extend or Release by a token that does not hold key
// here: taken if another token of this Session holds it (confirmed on its
// connection) or another connection does.
func (s *SessionStore) notHeld(ctx context.Context, key string, h *holding) error {
	var taken bool
	var err error
	if h != nil {
		taken, err = s.stillHeld(ctx, h)
	} else {
		taken, err = s.usedElsewhere(ctx, key)
	}
	if err != nil {
		return wrap("session", err)
	}
	return driver.NotHeld(taken)
}

// Extend confirms that token still holds key: its connection answers and
// IS_USED_LOCK names it (one round trip). If the connection broke, every
// key on it is forgotten (the server released them) and driver.NotHeld is
// returned: the lost signal. If ctx ends first it returns ctx's error and
// forgets nothing. The ttl is ignored.
func (s *SessionStore) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := checkArgs(key, token, 0, false); err != nil {
		return driver.Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return driver.Grant{}, errClosed
	}
	h := s.held[key]
	if h == nil || h.token != token {
		return driver.Grant{}, s.notHeld(ctx, key, h)
	}
	held, err := s.stillHeld(ctx, h)
	if err != nil && ctx.Err() != nil {
		return driver.Grant{}, err
	}
	if !held {
		return driver.Grant{}, driver.NotHeld(false)
	}
	return s.grant(h), nil
}

// Release removes one hold; the last one runs RELEASE_LOCK on the
// holding's connection, which is unpinned when it holds nothing more. A
// token that does not hold key gets driver.NotHeld; so does the last hold
// of a holding the server had already dropped.
//
// A ctx that has already ended returns an error matching ctx's error at
// once (no other sentinel): nothing is sent and nothing changes. The
// holding stays on its pinned connection, which stays pinned (it never
// goes back to the pool while it holds a lock) until a Release with a live
// context, or Close, gives it back. The connection is deliberately not
// discarded: that would free every other key held on it too, while their
// leases still report themselves valid. If ctx ends while Release waits
// for the connection's previous statement, it is the same: nothing sent.
// If ctx ends while RELEASE_LOCK runs, Release returns ctx's error and the
// statement finishes in the background, bounded by callTimeout: the
// holding is forgotten if it succeeds; if it fails, the connection is
// discarded (it broke or was closed: the server releases its locks; other
// keys on it are lost, as their Extend reports).
func (s *SessionStore) Release(ctx context.Context, key, token string) error {
	if err := checkArgs(key, token, 0, false); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mysqlstore: session release %q: nothing sent, the lock is still held: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	h := s.held[key]
	if h == nil || h.token != token {
		return s.notHeld(ctx, key, h)
	}
	if h.holds > 1 {
		h.holds--
		return nil
	}
	var released int
	late := func(err error) { // ctx ended first: settle the holding when the answer comes
		s.mu.Lock()
		defer s.mu.Unlock()
		if err == nil {
			s.forget(h)
		} else if !s.closed {
			s.lose(h.pc)
		}
	}
	err := s.call(ctx, h.pc, late, "SELECT COALESCE(RELEASE_LOCK(?), 0)", []any{h.name}, &released)
	if err != nil {
		if ctx.Err() == nil {
			s.lose(h.pc) // discarded: the server releases whatever it held
		}
		return wrap("session release", err)
	}
	s.forget(h)
	if released != 1 {
		return driver.NotHeld(false)
	}
	return nil
}

// forget drops one holding and unpins its connection if it holds nothing
// more. Called with s.mu.
func (s *SessionStore) forget(h *holding) {
	for k, x := range s.held {
		if x == h {
			delete(s.held, k)
			s.pins.DropLock(h.pc)
			return
		}
	}
}

// Close releases every holding by closing the pinned connections (the
// server releases their locks) and makes later calls fail with
// driver.ErrInvalid. It never closes the pool.
func (s *SessionStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, pc := range s.pins.Close() {
		discard(pc)
	}
	s.held = map[string]*holding{}
	return nil
}

// waitSeconds is GET_LOCK's timeout for ctx: its deadline rounded up, or
// "infinite" (0xFFFFFFFF seconds; MariaDB rejects -1).
func waitSeconds(ctx context.Context) int64 {
	dl, ok := ctx.Deadline()
	if !ok {
		return infinite
	}
	return int64(math.Max(1, math.Ceil(time.Until(dl).Seconds())))
}
