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

// errClosed is returned by every call after Close.
var errClosed = fmt.Errorf("%w: mysqlstore: session lock closed", driver.ErrInvalid)

// dialect is the store's named-lock SQL for its engine. A connection is
// asked only whether it holds the lock itself (taken: false).
func (s *SessionStore) dialect() sqlsession.Dialect[*conn, string] {
	return sqlsession.Dialect[*conn, string]{
		Lock:    func(key string) string { return LockName(s.opts.Table, key) },
		TryLock: s.tryLock,
		Check: func(ctx context.Context, c *conn, name string) (bool, bool, error) {
			// One statement says whose the lock is: this connection's, another's
			// (taken), or nobody's.
			var used sql.NullInt64
			var me int64
			err := c.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?), CONNECTION_ID()", name).Scan(&used, &me)
			return used.Valid && used.Int64 == me, used.Valid && used.Int64 != me, err
		},
		Unlock: func(ctx context.Context, c *conn, name string) (bool, error) {
			var released int
			err := c.QueryRowContext(ctx, "SELECT COALESCE(RELEASE_LOCK(?), 0)", name).Scan(&released)
			return released == 1, err
		},
		Taken: s.usedElsewhere,
		Wrap:  func(op string, err error) error { return wrap("session "+op, err) },
	}
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
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.Acquire(ctx, key, token)
}

// tryLock takes name with GET_LOCK(name, 0) and a fence on pc; a lock
// granted after ctx ended is released when the statement completes.
func (s *SessionStore) tryLock(ctx context.Context, pc *pinned, _, name string) (uint64, bool, error) {
	v, err := s.eng.Pins.Run(ctx, pc, func(ctx context.Context, c *conn) (any, error) {
		var fence uint64
		err := c.QueryRowContext(ctx, "SELECT IF(GET_LOCK(?, 0) = 1, NEXTVAL("+s.fence+"), 0)", name).Scan(&fence)
		return fence, err
	}, func(ctx context.Context, c *conn, v any, err error) {
		if err == nil && v.(uint64) > 0 { // granted after the caller left: undo
			_, _ = c.ExecContext(ctx, "DO RELEASE_LOCK(?)", name)
		}
	})
	if err != nil {
		return 0, false, wrap("session acquire", err)
	}
	fence := v.(uint64)
	return fence, fence > 0, nil
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

// Extend confirms that token still holds key: its connection answers and
// IS_USED_LOCK names it (one round trip). If the connection broke, every
// key on it is forgotten (the server released them) and driver.NotHeld is
// returned: the lost signal. If ctx ends first it returns ctx's error and
// forgets nothing. The ttl is ignored.
func (s *SessionStore) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := checkArgs(key, token, 0, false); err != nil {
		return driver.Grant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.Extend(ctx, key, token)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.Release(ctx, key, token)
}

// Close releases every holding by closing the pinned connections (the
// server frees their locks as it processes the disconnect, a moment after
// Close returns) and makes later calls fail with
// driver.ErrInvalid. It never closes the pool.
func (s *SessionStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pins, _ := s.eng.Close()
	for _, pc := range pins {
		discard(pc)
	}
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
