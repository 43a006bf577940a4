package pgstore

import (
	"context"
	"errors"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// cancelGrace bounds how long a cancelled queued wait waits for the server
// to acknowledge the cancel request before it closes the connection.
const cancelGrace = 2 * time.Second

// AcquireQueued implements driver.Queuer with the server's own lock queue:
// after one Acquire finds the key contended, it pins a connection of its own
// (within SessionOptions.MaxConns, less one kept for holdings; else
// ErrConnLimit) and waits in pg_advisory_lock, which PostgreSQL grants in
// the order the waiters asked, across every process. Once granted, the
// connection holds the key and serves later holdings too.
//
// When ctx ends first, it sends the server a cancel request, waits up to
// 2 s for the wait to end, and then closes the connection whatever
// the answer: the lock may have been granted just as the cancel landed, and
// closing the connection frees it (the server frees a closed session's
// locks), so a cancelled wait leaves nothing. It returns ctx's error.
func (s *SessionStore) AcquireQueued(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	g, err := s.Acquire(ctx, key, token, ttl)
	var ce *driver.ContendedError
	if !errors.As(err, &ce) {
		return g, err
	}
	p, err := s.eng.Pins.Pin(ctx, true)
	if err != nil {
		return driver.Grant{}, err
	}
	id := LockID(s.table, key)
	fence, err := s.queueWait(ctx, p, id)
	if err != nil {
		return driver.Grant{}, err
	}
	if fence == sharedFence {
		s.eng.Pins.Discard(p) // it took nothing; its session is not its own
		err := errShared(key)
		s.markShared(err)
		return driver.Grant{}, err
	}
	// Granted: the key's entry may be busy for a moment with another call.
	return s.eng.Granted(ctx, p, key, token, uint64(fence))
}

// queueWait runs pg_advisory_lock on p, which no other statement uses
// while it waits, and returns the fence (sqlsession.Pins.Wait: a cancel
// request when ctx ends, the connection closed if the wait has not ended
// within cancelGrace). On any error p is discarded (closed), which frees a
// lock granted as the error happened.
func (s *SessionStore) queueWait(ctx context.Context, p *pinned, id int64) (int64, error) {
	v, err := s.eng.Pins.Wait(ctx, p, s.done, cancelGrace, func(ctx context.Context, c *pgxpool.Conn) (any, error) {
		var fence int64
		err := c.QueryRow(ctx, s.guarded(lockSQL), id, cls(id), obj(id), s.seq).Scan(&fence)
		return fence, err
	}, func(p *pinned) error {
		cctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
		defer cancel()
		return p.C.Conn().PgConn().CancelRequest(cctx)
	})
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, errSessionClosed) {
			return 0, err
		}
		return 0, classify("wait", err)
	}
	return v.(int64), nil
}
