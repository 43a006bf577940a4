package mysqlstore

import (
	"context"
	"time"

	"example.com/dlock/driver"
)

// AcquireQueued behaves as Acquire (and first tries it), but when another
// connection holds key it waits in the server's own queue: a blocking
// GET_LOCK(name, timeout) on a connection pinned for the wait (counted
// against MaxConns), the timeout being ctx's deadline rounded up to
// seconds or "infinite". When ctx ends
// first, the wait is killed (KILL QUERY from another connection) and, if
// the server granted the lock anyway, it is released: nothing is left
// held. MariaDB grants a freed named lock to one of its waiters; the order
// among waiters is the server's (not promised FIFO).
func (s *SessionStore) AcquireQueued(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := checkArgs(key, token, 0, false); err != nil {
		return driver.Grant{}, err
	}
	// A free key is taken on a connection already pinned, if any has
	// room: only a real wait pins a connection of its own.
	g, err := s.Acquire(ctx, key, token, ttl)
	if _, contended := err.(*driver.ContendedError); !contended {
		return g, err
	}
	s.mu.Lock()
	if g, ok := s.eng.Reenter(key, token); ok {
		s.mu.Unlock()
		return g, nil
	}
	// Held by another token of this Session, or by nobody here: wait on
	// the server like anyone else; the holder's release frees the name.
	s.mu.Unlock()
	pc, err := s.eng.Pins.Pin(ctx, true) // within MaxConns, or ErrConnLimit
	if err != nil {
		return driver.Grant{}, err
	}
	fence, err := s.wait(ctx, pc, LockName(s.opts.Table, key))
	if err != nil {
		return driver.Grant{}, err
	}
	// The server granted the name, so an old holding here is gone
	// (released, or its connection died): the new one replaces it.
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.Granted(ctx, pc, key, token, fence)
}

// wait blocks in GET_LOCK on pc, pinned for the wait, until granted or ctx
// ends (sqlsession.Pins.Wait: KILL QUERY from another connection when ctx
// ends, the connection closed if the wait has not ended within
// callTimeout); on any failure the connection is discarded (the server
// releases a late grant with it).
func (s *SessionStore) wait(ctx context.Context, pc *pinned, name string) (uint64, error) {
	// Not cancelled with ctx: a cancelled query would close the
	// connection under the driver; KILL QUERY ends it instead.
	v, err := s.eng.Pins.Wait(ctx, pc, nil, callTimeout, func(qctx context.Context, c *conn) (any, error) {
		var fence uint64
		err := c.QueryRowContext(qctx, "SELECT IF(GET_LOCK(?, ?) = 1, NEXTVAL("+s.fence+"), 0)", name, waitSeconds(ctx)).Scan(&fence)
		return fence, err
	}, func(pc *pinned) error {
		kc, cancel := detached(ctx)
		defer cancel()
		_, err := s.db.ExecContext(kc, "KILL QUERY ?", pc.C.id)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return 0, err
		}
		return 0, wrap("session wait", err)
	}
	if fence := v.(uint64); fence > 0 {
		return fence, nil
	}
	s.eng.Pins.Discard(pc)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return 0, &driver.ContendedError{Remaining: -1} // the timeout passed
}
