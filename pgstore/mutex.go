package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// Acquire implements driver.Mutex in one statement (docs/postgres.md shows
// it; a key without a row, never locked or swept since, takes a second one): a free
// or expired key gets a new holding with a fence from the sequence, the
// holder's token re-enters (fence kept, expiry the later of the current one
// and ttl from now), another holder's key is left as it is and Acquire
// returns a *driver.ContendedError with that holder's remaining time on the
// database clock. A key with a NUL byte or a ttl under a millisecond
// returns an error matching driver.ErrInvalid before any I/O; a failure to
// get an answer is an error matching no sentinel (outcome unknown).
func (s *Store) Acquire(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := s.check(key, ttl); err != nil {
		return driver.Grant{}, err
	}
	s.startSweep()
	var (
		mine         bool
		fence, holds int64
		remaining    int64
	)
	args := []any{key, digest(token), micros(ttl)}
	err := s.db.queryRow(ctx, s.sql.acquire, args, &mine, &fence, &holds, &remaining)
	if errors.Is(err, pgx.ErrNoRows) { // no row for key: insert one
		err = s.db.queryRow(ctx, s.sql.insert, args, &mine, &fence, &holds, &remaining)
	}
	if err != nil {
		return driver.Grant{}, wrap("acquire", err)
	}
	if !mine {
		return driver.Grant{}, &driver.ContendedError{Remaining: max(0, time.Duration(remaining)*time.Microsecond)}
	}
	if meta := driver.MetaFrom(ctx); meta != "" && holds == 1 {
		s.setMeta(ctx, key, fence, meta) // a new holding's: a re-entry keeps the first
	}
	return driver.Grant{Fence: uint64(fence), Holds: int(holds), TTL: ttl}, nil
}

// Extend implements driver.Mutex in one statement: it sets a live
// holding's expiry to ttl from now on the database clock, shorter or
// longer. A key that is free, expired or held by another token is left as
// it is: driver.NotHeld(taken). Errors as Acquire.
func (s *Store) Extend(ctx context.Context, key, token string, ttl time.Duration) (driver.Grant, error) {
	if err := s.check(key, ttl); err != nil {
		return driver.Grant{}, err
	}
	var (
		fence, holds int64
		taken        bool
	)
	err := s.db.queryRow(ctx, s.sql.extend, []any{key, digest(token), micros(ttl)}, &fence, &holds, &taken)
	if err != nil {
		return driver.Grant{}, wrap("extend", err)
	}
	if fence == 0 {
		return driver.Grant{}, driver.NotHeld(taken)
	}
	return driver.Grant{Fence: uint64(fence), Holds: int(holds), TTL: ttl}, nil
}

// Release implements driver.Mutex in one statement (a refused release
// takes a second one, to tell taken from free): it takes one hold off
// a live holding of token, and on the last one frees the row (kept for the
// key's next Acquire, deleted by the sweep) and, if someone waited for the
// holding (see Subscribe), sends NOTIFY on the store's channel with the key
// (delivered to listeners when the statement commits). A key that is free, expired or held by another
// token is left as it is: driver.NotHeld(taken). Errors as Acquire.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := s.check(key, time.Millisecond); err != nil {
		return err
	}
	var (
		freed    bool
		notified int64
	)
	owner := digest(token)
	err := s.db.queryRow(ctx, s.sql.release, []any{key, owner, s.names.channel()}, &freed, &notified)
	if errors.Is(err, pgx.ErrNoRows) { // token holds nothing: why?
		var taken bool
		if err := s.db.queryRow(ctx, s.sql.taken, []any{key, owner}, &taken); err != nil {
			return wrap("release", err)
		}
		return driver.NotHeld(taken)
	}
	if err != nil {
		return wrap("release", err)
	}
	return nil
}

// check validates the arguments and that the store is open.
func (s *Store) check(key string, ttl time.Duration) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errClosed()
	}
	if err := checkKey(key); err != nil {
		return err
	}
	return checkTTL(ttl)
}

// Transfer implements driver.Transferer in one statement (a plain UPDATE:
// PostgreSQL computes its SET, nextval included, under the row lock, on the
// row's latest version when it had to wait, as for acquire; a second
// statement runs only when nothing changed, to say why): a live holding
// of from with exactly one hold becomes to's, with one hold, a fence from
// the sequence and an expiry of ttl from now on the database clock. The key
// is never free, so no NOTIFY is sent. If from does not hold key it
// changes nothing and returns driver.NotHeld(taken); if from holds it more
// than once, an error matching driver.ErrInvalid. Other errors as Acquire.
func (s *Store) Transfer(ctx context.Context, key, from, to string, ttl time.Duration) (driver.Grant, error) {
	if err := s.check(key, ttl); err != nil {
		return driver.Grant{}, err
	}
	var (
		fence, holds int64
		taken        bool
	)
	df := digest(from)
	err := s.db.queryRow(ctx, s.sql.transfer, []any{key, df, digest(to), micros(ttl)}, &fence)
	if err == nil {
		return driver.Grant{Fence: uint64(fence), Holds: 1, TTL: ttl}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) { // both backends report no row as pgx.ErrNoRows
		return driver.Grant{}, wrap("transfer", err)
	}
	// Nothing changed: say why (a second statement, on this path only).
	if err := s.db.queryRow(ctx, s.sql.refused, []any{key, df}, &holds, &taken); err != nil {
		return driver.Grant{}, wrap("transfer refused, reading the key's state", err)
	}
	switch {
	case holds > 1:
		return driver.Grant{}, fmt.Errorf("%w: pgstore: transfer of a key held %d times (re-entered)", driver.ErrInvalid, holds)
	case holds == 1:
		// Held once now: another call on from's token changed the row
		// between the two statements. Nothing was transferred.
		return driver.Grant{}, fmt.Errorf("%w: pgstore: transfer refused: the holding changed during the call", driver.ErrInvalid)
	}
	return driver.Grant{}, driver.NotHeld(taken)
}
