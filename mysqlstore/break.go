package mysqlstore

import (
	"bytes"
	"context"

	"example.com/dlock/driver"
)

var _ driver.Breaker = (*Store)(nil)

// breakSQL frees key's live row whoever holds it: its expiry set to now
// (free, as a release leaves it) and its hold count negated, which marks
// the row as broken for its owner (see row.taken) until a new holding or
// the sweep replaces it. holds is assigned first, from the old expiry;
// expires_at then reads the old expiry too, whichever way MariaDB assigns.
// A missing key gets a free row (owner zero), as Extend leaves one.
// RETURNING gives the new values: negative holds with 0 µs left means
// this very statement broke the row.
func (s *Store) breakSQL() string {
	return "INSERT INTO " + s.n.locks + " (name, owner, holds, fence, expires_at) VALUES (?, ?, 0, 0, '1970-01-01')" +
		" ON DUPLICATE KEY UPDATE" +
		" holds = IF(expires_at > " + now + " AND holds > 0, -holds, holds)," +
		" expires_at = IF(expires_at > " + now + ", " + now + ", expires_at)" +
		" RETURNING owner, holds, fence, " + remaining
}

// Break implements driver.Breaker in one statement on the lease table: the
// key's live row is freed whoever holds it, its fence kept in the row and
// the sequence untouched (the next holding's fence is greater), and the
// holding ended is returned (Token empty: the table keeps a digest;
// Remaining unknown). The broken holder's Extend and Release answer
// driver.NotHeld(taken) until a new holding or the sweep replaces the row
// (then NotHeld(false)). Waiters are not woken (the store has no
// notifier): they retry on their backoff. A free key returns Held false
// and changes nothing but, for a missing row, a free row the sweep
// removes. Errors are as for Extend.
func (s *Store) Break(ctx context.Context, key string) (driver.BrokenHolding, error) {
	if err := checkArgs(key, "x", 0, false); err != nil {
		return driver.BrokenHolding{}, err
	}
	r, err := s.exec(ctx, "break", s.breakSQL(), []byte(key), zeroOwner)
	if err != nil {
		return driver.BrokenHolding{}, err
	}
	if r.holds >= 0 || r.remain != 0 || bytes.Equal(r.owner, zeroOwner) {
		return driver.BrokenHolding{Info: driver.Info{Fence: r.fence, Remaining: -1}}, nil
	}
	return driver.BrokenHolding{Info: driver.Info{Held: true, Holds: -r.holds, Fence: r.fence, Remaining: -1}}, nil
}
