package pgstore

import (
	"context"
	"errors"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// Inspect implements driver.Inspector with one read: the live row of key,
// if any. Info.Token is always empty (the table keeps only a digest of the
// token); Fence is 0 for a free key (a released key keeps its row until
// the sweep, but only a live row is read).
// An empty key or one with a NUL byte returns an error matching
// driver.ErrInvalid before any I/O; a missing table or privilege, one
// matching driver.ErrRefused; an error matching no sentinel means the
// database did not answer.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := checkKey(key); err != nil {
		return driver.Info{}, err
	}
	var (
		owner                   string
		holds, fence, remaining int64
	)
	err := s.db.queryRow(ctx, s.sql.inspect, []any{key}, &owner, &holds, &fence, &remaining)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Info{Remaining: -1}, nil
	}
	if err != nil {
		return driver.Info{}, wrap("inspect", err)
	}
	return info(holds, fence, remaining), nil
}

func info(holds, fence, remaining int64) driver.Info {
	return driver.Info{Held: true, Holds: int(holds), Fence: uint64(fence), Remaining: max(0, time.Duration(remaining)*time.Microsecond)}
}

// List implements driver.Lister with one query: every live row whose name
// starts with prefix (a plain prefix: % and _ are not wildcards). The table
// holds nothing but locks, so nothing is skipped. Errors are as for Inspect;
// fn may have been called for some keys before one.
func (s *Store) List(ctx context.Context, prefix string, fn func(key string, info driver.Info) bool) error {
	err := s.db.query(ctx, s.sql.list, []any{prefix}, func(scan func(...any) error) (bool, error) {
		var (
			name, owner             string
			holds, fence, remaining int64
		)
		if err := scan(&name, &owner, &holds, &fence, &remaining); err != nil {
			return false, err
		}
		return fn(name, info(holds, fence, remaining)), nil
	})
	if err != nil {
		return wrap("list", err)
	}
	return nil
}
