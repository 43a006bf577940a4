package pgstore

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// backend is what the store needs of the caller's pool: pgx's or
// database/sql's.
type backend interface {
	// queryRow runs q and scans its one row into dest; pgx.ErrNoRows if
	// there is none.
	queryRow(ctx context.Context, q string, args []any, dest ...any) error
	// exec runs q and returns the rows it affected.
	exec(ctx context.Context, q string, args ...any) (int64, error)
	// query runs q and calls each for every row until it returns false.
	query(ctx context.Context, q string, args []any, each func(scan func(...any) error) (bool, error)) error
	// listenConn returns a connection for LISTEN, used by one goroutine
	// only, and the function that gives it back (closing it).
	listenConn(ctx context.Context) (*pgx.Conn, func(), error)
}

type pgxBackend struct{ pool *pgxpool.Pool }

func (b pgxBackend) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	return b.pool.QueryRow(ctx, q, args...).Scan(dest...)
}

func (b pgxBackend) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := b.pool.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (b pgxBackend) query(ctx context.Context, q string, args []any, each func(scan func(...any) error) (bool, error)) error {
	rows, err := b.pool.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		more, err := each(rows.Scan)
		if err != nil || !more {
			return err
		}
	}
	return rows.Err()
}

// listenConn opens a connection of its own with the pool's settings, so
// that listening takes nothing from the pool's capacity.
func (b pgxBackend) listenConn(ctx context.Context) (*pgx.Conn, func(), error) {
	c, err := pgx.ConnectConfig(ctx, b.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, nil, err
	}
	return c, func() { _ = c.Close(context.Background()) }, nil
}

type sqlBackend struct{ db *sql.DB }

func (b sqlBackend) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	err := b.db.QueryRowContext(ctx, q, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return pgx.ErrNoRows
	}
	return err
}

func (b sqlBackend) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := b.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (b sqlBackend) query(ctx context.Context, q string, args []any, each func(scan func(...any) error) (bool, error)) error {
	rows, err := b.db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		more, err := each(rows.Scan)
		if err != nil || !more {
			return err
		}
	}
	return rows.Err()
}

// errNotPgx is why a *sql.DB of another driver cannot listen.
var errNotPgx = errors.New("the *sql.DB does not use pgx's stdlib driver (github.com/jackc/pgx/v5/stdlib), so it cannot LISTEN")

// listenConn pins one connection of the *sql.DB (database/sql has no other
// way to hold one) and uses its pgx connection for as long as the listener
// runs: the pgx connection is handed out from inside sql.Conn.Raw, which
// returns only when the listener gives it back.
func (b sqlBackend) listenConn(ctx context.Context) (*pgx.Conn, func(), error) {
	sc, err := b.db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	got := make(chan *pgx.Conn, 1)
	done := make(chan struct{})
	rawDone := make(chan error, 1)
	go func() {
		rawDone <- sc.Raw(func(dc any) error {
			c, ok := dc.(*stdlib.Conn)
			if !ok {
				return errNotPgx
			}
			got <- c.Conn()
			<-done
			// The listener may have left the connection in LISTEN: a
			// closed connection is never handed to anyone else.
			return sqldriver.ErrBadConn
		})
	}()
	select {
	case c := <-got:
		return c, func() { close(done); <-rawDone; _ = sc.Close() }, nil
	case err := <-rawDone:
		_ = sc.Close()
		return nil, nil, fmt.Errorf("pgstore: listen: %w", err)
	}
}
