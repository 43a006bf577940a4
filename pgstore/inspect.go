package pgstore

import (
	"context"
	"errors"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// Inspect implements driver.Inspector with one read: the live row of key,
// if any, with its holder metadata (KeepsMeta). Info.Token is always empty (the table keeps only a digest of the
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
		owner, meta             string
		holds, fence, remaining int64
	)
	err := s.db.queryRow(ctx, s.sql.inspectMeta, []any{key}, &owner, &holds, &fence, &remaining, &meta)
	if noMetaColumn(err) { // a table from before the meta column
		err = s.db.queryRow(ctx, s.sql.inspect, []any{key}, &owner, &holds, &fence, &remaining)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Info{Remaining: -1}, nil
	}
	if err != nil {
		return driver.Info{}, wrap("inspect", err)
	}
	return info(holds, fence, remaining, meta), nil
}

func info(holds, fence, remaining int64, meta string) driver.Info {
	return driver.Info{Held: true, Holds: int(holds), Fence: uint64(fence), Remaining: max(0, time.Duration(remaining)*time.Microsecond), Meta: meta}
}

// List implements driver.Lister with one query: every live row whose name
// starts with prefix (a plain prefix: % and _ are not wildcards). The table
// holds nothing but locks, so nothing is skipped. Errors are as for Inspect;
// fn may have been called for some keys before one.
func (s *Store) List(ctx context.Context, prefix string, fn func(key string, info driver.Info) bool) error {
	err := s.list(ctx, s.sql.listMeta, prefix, fn)
	if noMetaColumn(err) { // a table from before the meta column: fn was not called
		err = s.list(ctx, s.sql.list, prefix, fn)
	}
	if err != nil {
		return wrap("list", err)
	}
	return nil
}

// list runs q, the list or listMeta statement, calling fn for each row.
func (s *Store) list(ctx context.Context, q, prefix string, fn func(key string, info driver.Info) bool) error {
	withMeta := q == s.sql.listMeta
	return s.db.query(ctx, q, []any{prefix}, func(scan func(...any) error) (bool, error) {
		var (
			name, owner, meta       string
			holds, fence, remaining int64
		)
		dest := []any{&name, &owner, &holds, &fence, &remaining}
		if withMeta {
			dest = append(dest, &meta)
		}
		if err := scan(dest...); err != nil {
			return false, err
		}
		return fn(name, info(holds, fence, remaining, meta)), nil
	})
}
