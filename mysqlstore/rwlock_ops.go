package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
)

// The RWMutex's calls on one holding (ExtendRW, ReleaseRW) and its
// inspection; the acquisitions are in rwlock.go.

var _ driver.RWInspector = (*Store)(nil)

// ExtendRW implements driver.RWMutex in two statements: an UPDATE that
// sets token's live holding of key to expire ttl from now on the database
// clock (shorter or longer; other holdings untouched), then a read of the
// holding and the key's readers. If token holds nothing of key it changes
// nothing and returns driver.NotHeld(false) (ErrExpired). Bad arguments
// return driver.ErrInvalid before any I/O; a missing schema
// driver.ErrRefused; other errors leave the outcome unknown.
func (s *Store) ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if err := checkRW(ctx, key, token, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	H, k, d := s.n.rwHolds, []byte(key), digest(token)
	_, err := s.db.ExecContext(ctx, "UPDATE "+H+" SET expires_at = "+now+" + INTERVAL ? MICROSECOND"+
		" WHERE name = ? AND owner = ? AND expires_at > "+now, ttl.Microseconds(), k, d)
	if err != nil {
		return driver.RWGrant{}, wrap("extend rw", err)
	}
	// The UPDATE's count of rows is of rows changed, 0 for an expiry set
	// to its own value: the read below tells whether token holds the key.
	g := driver.RWGrant{TTL: ttl}
	err = s.db.QueryRowContext(ctx, "SELECT mode, fence, (SELECT COUNT(*) FROM "+H+" WHERE name = ? AND mode = 1 AND expires_at > "+now+")"+
		" FROM "+H+" WHERE name = ? AND owner = ? AND expires_at > "+now, k, k, d).Scan(&g.Mode, &g.Fence, &g.Readers)
	if errors.Is(err, sql.ErrNoRows) {
		return driver.RWGrant{}, driver.NotHeld(false)
	}
	if err != nil {
		return driver.RWGrant{}, wrap("extend rw", err)
	}
	if g.Mode == driver.RWWrite {
		g.Readers = 0
	}
	return g, nil
}

// ReleaseRW implements driver.RWMutex in one statement: it deletes token's
// live holding of key. If token holds nothing of key it changes nothing
// and returns driver.NotHeld(false) (ErrExpired). No waiter is woken (there
// is no RWNotifier): waiters find the key free at their next try.
// go-sql-driver never resends a statement once it may have reached the
// server, so a repeated release answers NotHeld. Errors as ExtendRW.
func (s *Store) ReleaseRW(ctx context.Context, key, token string) error {
	if err := checkRW(ctx, key, token, time.Millisecond); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, "DELETE FROM "+s.n.rwHolds+" WHERE name = ? AND owner = ? AND expires_at > "+now,
		[]byte(key), digest(token))
	if err != nil {
		return wrap("release rw", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return driver.NotHeld(false)
	}
	s.maybeSweep(ctx)
	return nil
}

// InspectRW implements driver.RWInspector with two unlocked reads (the
// mark, then the holdings): each live holding's mode, fence and time left,
// with Token "" (the table keeps a digest of tokens), and the live mark's
// time left. A free key is not an error. A bad key returns
// driver.ErrInvalid before any I/O; a missing schema driver.ErrRefused.
func (s *Store) InspectRW(ctx context.Context, key string) (driver.RWInfo, error) {
	if err := driver.ValidateKey(key); err != nil {
		return driver.RWInfo{}, err
	}
	if len(key) > MaxKeyBytes {
		return driver.RWInfo{}, fmt.Errorf("%w: mysqlstore: key of %d bytes (at most %d)", driver.ErrInvalid, len(key), MaxKeyBytes)
	}
	var info driver.RWInfo
	var markUS int64
	err := s.db.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(MICROSECOND, "+now+", mark_until) FROM "+s.n.rwKeys+
		" WHERE name = ? AND mark_until > "+now, []byte(key)).Scan(&markUS)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return driver.RWInfo{}, wrap("inspect rw", err)
	}
	info.WriterWaiting = micros(markUS)
	rows, err := s.db.QueryContext(ctx, "SELECT mode, fence, "+remaining+" FROM "+s.n.rwHolds+
		" WHERE name = ? AND expires_at > "+now, []byte(key))
	if err != nil {
		return driver.RWInfo{}, wrap("inspect rw", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h driver.RWHolder
		var left int64
		if err := rows.Scan(&h.Mode, &h.Fence, &left); err != nil {
			return driver.RWInfo{}, wrap("inspect rw", err)
		}
		h.Remaining = micros(left)
		info.Mode, info.Holders = h.Mode, append(info.Holders, h)
	}
	if err := rows.Err(); err != nil {
		return driver.RWInfo{}, wrap("inspect rw", err)
	}
	return info, nil
}
