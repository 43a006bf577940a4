package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/internal/sqlsession"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pinned connections: package internal/sqlsession pins them, bounds them
// and runs each statement (see sqlsession.Pins.Run); a statement that gets
// no answer within the check interval closes its connection, whose locks
// are then lost.

// pinned is one connection taken from the pool and held.
type pinned = sqlsession.Conn[*pgxpool.Conn]

// holding is a key held on a pinned connection; its lock is the advisory
// lock id (LockID).
type holding = sqlsession.Holding[*pgxpool.Conn, int64]

// connectWait bounds how long the store waits for the pool to open a new
// connection when it has room for one.
const connectWait = 10 * time.Second

// errConnDead is what a statement on a dead pinned connection returns.
var errConnDead = sqlsession.ErrConnDead

// newEngine returns the store's engine: its pinned connections, bounded by
// MaxConns (less one for holdings when waiting) and ConnWait, and the
// advisory lock statements (session_ops.go).
func (s *SessionStore) newEngine() *sqlsession.Engine[*pgxpool.Conn, int64] {
	pins := sqlsession.New(sqlsession.Config{
		MaxConns: s.max, MaxWaiting: s.maxWait, PerConn: s.perConn, Timeout: s.ttl,
		ErrLimit: ErrConnLimit, ErrClosed: errSessionClosed,
	}, sqlsession.Hooks[*pgxpool.Conn]{
		Open: s.open,
		Drop: func(p *pinned) { p.C.Release() }, // the pool destroys a closed one
		Kill: func(p *pinned) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = p.C.Conn().Close(ctx)
			cancel()
		},
		Broken: func(c *pgxpool.Conn, _ error) bool { return c.Conn().IsClosed() },
		Busy:   func(err error) bool { return errors.Is(err, ErrPoolExhausted) },
	})
	return sqlsession.NewEngine(pins, sqlsession.Options{
		Name: "pgstore", TTL: s.ttl, CheckReentry: true, ErrClosed: errSessionClosed,
	}, s.dialect())
}

// open takes a new connection from the pool within ConnWait (a slot the
// pool has free may take longer to connect: up to connectWait) and checks
// once whether the server session is shared (checkShared).
func (s *SessionStore) open(ctx context.Context) (*pgxpool.Conn, error) {
	limit := s.wait
	if st := s.pool.Stat(); st.AcquiredConns() < st.MaxConns() {
		limit = max(limit, connectWait)
	}
	actx, cancel := context.WithTimeout(ctx, limit)
	c, err := s.pool.Acquire(actx)
	cancel()
	if err == nil {
		if err = s.checkShared(ctx, c); err != nil {
			c.Release()
			return nil, err
		}
		return c, nil
	}
	if st := s.pool.Stat(); ctx.Err() == nil && actx.Err() != nil && st.AcquiredConns() >= st.MaxConns() {
		return nil, fmt.Errorf("%w: no connection within %v (pool MaxConns %d, %d in use)", ErrPoolExhausted, limit, st.MaxConns(), st.AcquiredConns())
	}
	return nil, fmt.Errorf("pgstore: take a connection from the pool: %w", err)
}

// giveBack returns p, claimed by Close (p.gone set), to the pool, first
// unlocking its advisory locks if unlock is set; a connection that cannot
// be unlocked is closed instead. It waits for the statement under way on p;
// if ctx ends first the connection is closed, which frees its locks too.
func giveBack(ctx context.Context, p *pinned, unlock bool) error {
	if err := p.Hold(ctx); err != nil {
		return fmt.Errorf("pgstore: close: a statement is still running on a pinned connection: %w", err)
	}
	defer p.Unhold()
	var err error
	if unlock && !p.C.Conn().IsClosed() {
		if _, err = p.C.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
			_ = p.C.Conn().Close(ctx)
			err = fmt.Errorf("pgstore: unlock on close (the connection was closed instead): %w", err)
		}
	}
	p.C.Release()
	return err
}
