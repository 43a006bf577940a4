package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
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
	p, err := s.pins.Pin(ctx, true)
	if err != nil {
		return driver.Grant{}, err
	}
	id := LockID(s.table, key)
	fence, err := s.queueWait(ctx, p, id)
	if err != nil {
		return driver.Grant{}, err
	}
	if fence == sharedFence {
		s.pins.Discard(p) // it took nothing; its session is not its own
		err := errShared(key)
		s.markShared(err)
		return driver.Grant{}, err
	}
	// Granted: the key's entry may be busy for a moment with another call.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.ttl)
	defer cancel()
	e, err := s.enter(ectx, key)
	if err != nil {
		s.pins.Discard(p) // frees the lock
		return driver.Grant{}, fmt.Errorf("pgstore: acquire %q: granted but not recorded: %w", key, err)
	}
	defer s.leave(key, e)
	s.pins.Settle(p)
	s.record(e, &holding{key: key, dig: tokenDigest(token), p: p, id: id, holds: 1, fence: uint64(fence)})
	s.pins.Unuse(p)
	return driver.Grant{Fence: uint64(fence), Holds: 1, TTL: s.ttl}, nil
}

// queueWait runs pg_advisory_lock on p, which no other statement uses
// while it waits, and returns the fence. On any error p is discarded
// (closed), which frees a lock granted as the error happened.
func (s *SessionStore) queueWait(ctx context.Context, p *pinned, id int64) (int64, error) {
	type result struct {
		fence int64
		err   error
	}
	_ = p.Hold(context.Background()) // free: nothing else runs on a waiting connection
	defer p.Unhold()
	qctx, qcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer qcancel()
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = p.C.QueryRow(qctx, s.guarded(lockSQL), id, cls(id), obj(id), s.seq).Scan(&r.fence)
		done <- r
	}()
	select {
	case r := <-done:
		if r.err != nil {
			s.pins.Discard(p)
			return 0, classify("wait", r.err)
		}
		return r.fence, nil
	case <-ctx.Done():
	case <-s.done:
	}
	cctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	_ = p.C.Conn().PgConn().CancelRequest(cctx)
	select {
	case <-done:
	case <-cctx.Done():
		qcancel() // pgx then closes the connection to end the query
		<-done
	}
	cancel()
	s.pins.Discard(p)
	if ctx.Err() == nil {
		return 0, errSessionClosed
	}
	return 0, ctx.Err()
}
