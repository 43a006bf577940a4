package pgstore

import (
	"context"
	"errors"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5"
)

var _ driver.Breaker = (*Store)(nil)

// Break implements driver.Breaker in one statement on the lease table: the
// key's live row is freed whoever holds it (its expiry set to -infinity;
// the fence sequence is not touched, so the next holding's fence is
// greater), NOTIFY wakes the waiters, and the holding ended is returned
// (Info.Token is empty: the table keeps only a digest). The broken
// holder's Extend and Release answer driver.NotHeld(taken) until a new
// holding or the sweep replaces the row (then NotHeld(false)). A free key
// returns Held false and changes nothing. Errors are as for Inspect.
func (s *Store) Break(ctx context.Context, key string) (driver.BrokenHolding, error) {
	if err := s.check(key, time.Millisecond); err != nil {
		return driver.BrokenHolding{}, err
	}
	var holds, fence, remaining, notified int64
	err := s.db.queryRow(ctx, s.sql.breaks, []any{key, s.names.channel()}, &holds, &fence, &remaining, &notified)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.BrokenHolding{Info: driver.Info{Remaining: -1}}, nil
	}
	if err != nil {
		return driver.BrokenHolding{}, wrap("break", err)
	}
	return driver.BrokenHolding{Info: info(holds, fence, remaining, "")}, nil
}
