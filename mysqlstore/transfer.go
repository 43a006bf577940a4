package mysqlstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"example.com/dlock/driver"
)

// transferStmt builds the Transfer statement on the lease table n: the live
// holding of ?from with exactly one hold becomes ?to's, with a fence from
// the sequence and an expiry of ?ttl µs from now. Arguments: key, the zero
// owner, from, from, ttl, from, to.
//
// A missing key gets a free row (owner zero, expired), as Extend's does,
// which the sweep removes. On an existing row the update runs under the
// row lock (InnoDB locks the duplicate before ON DUPLICATE KEY UPDATE
// evaluates), and NEXTVAL sits in the UPDATE part, evaluated only when the
// condition holds (IF evaluates one branch): the fence is drawn after every
// earlier holding of the key committed, so it is greater than each of
// their fences. (NEXTVAL in the VALUES row would be drawn before the row
// lock wait: TestTransferFenceOrder's control.)
//
// The assignments keep the condition's meaning whichever way MariaDB
// assigns (left to right, each seeing the new values before it, or all at
// once under sql_mode SIMULTANEOUS_ASSIGNMENT): fence first (the condition
// does not read it); then expires_at, which moves from a live expiry to
// another live one (ttl > 0), so "expires_at > now" keeps its value; owner
// last. holds is 1 before and after.
func transferStmt(n names) string {
	held := "owner = ? AND holds = 1 AND expires_at > " + now
	return "INSERT INTO " + n.locks + " (name, owner, holds, fence, expires_at) VALUES (?, ?, 0, 0, '1970-01-01')" +
		" ON DUPLICATE KEY UPDATE" +
		" fence = IF(" + held + ", NEXTVAL(" + n.fence + "), fence)," +
		" expires_at = IF(" + held + ", " + now + " + INTERVAL ? MICROSECOND, expires_at)," +
		" owner = IF(" + held + ", ?, owner)" +
		" RETURNING owner, holds, fence, " + remaining
}

// Transfer implements driver.Transferer in one statement (one round trip
// with interpolateParams=true): if token from holds key with exactly one
// hold, the key becomes to's, with one hold, a fence greater than every
// earlier fence of the key (drawn under the row lock) and an expiry ttl
// from now on the database clock. The key is never free in between, so no
// other client can take it. to must be a token that does not hold key (the
// Client passes a fresh one).
//
// If from does not hold key it changes nothing and returns driver.NotHeld
// (ErrTaken when another owner holds it); if from holds it more than once
// (re-entered), an error matching driver.ErrInvalid and changes nothing.
// Bad arguments (or from == to) return driver.ErrInvalid before any I/O, a
// missing schema driver.ErrRefused; other errors leave the outcome unknown
// (the key is from's or to's).
func (s *Store) Transfer(ctx context.Context, key, from, to string, ttl time.Duration) (driver.Grant, error) {
	if err := checkArgs(key, from, ttl, true); err != nil {
		return driver.Grant{}, err
	}
	if err := checkArgs(key, to, ttl, true); err != nil {
		return driver.Grant{}, err
	}
	if from == to {
		return driver.Grant{}, fmt.Errorf("%w: mysqlstore: transfer to the holding token itself", driver.ErrInvalid)
	}
	df, dt := digest(from), digest(to)
	us := ttl.Microseconds()
	r, err := s.exec(ctx, "transfer", s.transferSQL, []byte(key), zeroOwner, df, df, us, df, dt)
	if err != nil {
		return driver.Grant{}, err
	}
	switch {
	// This statement moved the row: to owns it with exactly ttl left on
	// the statement's clock (UTC_TIMESTAMP is fixed for a statement). A
	// row to held before (it never does: to is fresh) has less left.
	case bytes.Equal(r.owner, dt) && r.remain == time.Duration(us)*time.Microsecond:
		return driver.Grant{Fence: r.fence, Holds: 1, TTL: ttl}, nil
	case bytes.Equal(r.owner, df) && r.holds > 1 && r.remain > 0:
		return driver.Grant{}, fmt.Errorf("%w: mysqlstore: transfer of a key held %d times (re-entered)", driver.ErrInvalid, r.holds)
	}
	return driver.Grant{}, driver.NotHeld(r.taken(df))
}
