package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
)

// transferStmt builds the Transfer statement on the lease table n: the live
// holding of from with exactly one hold becomes to's, with a fence from the
// sequence and an expiry of ttl µs from now. Arguments: ttl, to, key, from.
//
// A plain UPDATE by primary key, not the INSERT ... ON DUPLICATE KEY
// UPDATE ... RETURNING of Acquire: MariaDB 10.11 has no UPDATE ...
// RETURNING, but the statement's OK packet carries the value given to
// LAST_INSERT_ID(expr) and the affected row count, which go-sql-driver
// reports (Result.LastInsertId, RowsAffected): the new fence comes back
// in the same round trip. Measured (TestMeasureTransferStatement: one
// goroutine, hand-over chains on one key, 30 s, two runs, load average
// 16-20): 237 and 214 µs per transfer against 288 and 250 µs for the
// INSERT form; the sequence's NEXTVAL costs little (a per-key fence + 1
// gave 225 and 208 µs).
//
// InnoDB locks the row before it evaluates the WHERE on its latest version
// and then the SET: NEXTVAL is drawn under the row lock, after every
// earlier holding of the key committed, so the fence is greater than each
// of their fences. (A fence drawn before the lock wait is
// TestTransferFenceOrder's control.) The WHERE decides everything, so
// MariaDB's assignment order (left to right, or SIMULTANEOUS_ASSIGNMENT)
// does not matter.
//
// Side effect: the pooled connection's session value of LAST_INSERT_ID()
// becomes the fence. Code that reads LAST_INSERT_ID() does so on its own
// sql.Conn or sql.Tx (on a bare *sql.DB the next statement may run on any
// connection), which the store never uses.
func transferStmt(n names) string {
	return "UPDATE " + n.locks + " SET fence = LAST_INSERT_ID(NEXTVAL(" + n.fence + "))," +
		" expires_at = " + now + " + INTERVAL ? MICROSECOND, owner = ?" +
		" WHERE name = ? AND owner = ? AND holds = 1 AND expires_at > " + now
}

// Transfer implements driver.Transferer in one statement (one round trip
// with interpolateParams=true): if token from holds key with exactly one
// hold, the key becomes to's, with one hold, a fence greater than every
// earlier fence of the key (drawn under the row lock) and an expiry ttl
// from now on the database clock. The key is never free in between, so no
// other client can take it.
//
// If from does not hold key it changes nothing and returns driver.NotHeld
// (ErrTaken when another owner holds it); if from holds it more than once
// (re-entered), an error matching driver.ErrInvalid and changes nothing.
// Telling these apart takes a second statement, a read of the key's row,
// on the refused path only. Bad arguments (or from == to) return
// driver.ErrInvalid before any I/O, a missing schema or privilege driver.ErrRefused;
// other errors leave the outcome unknown (the key is from's or to's).
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
	df := digest(from)
	var res sql.Result
	var err error
	for try := 0; try < 3; try++ {
		res, err = s.db.ExecContext(ctx, s.transferSQL, ttl.Microseconds(), digest(to), []byte(key), df)
		if errNumber(err) != erDeadlock {
			break
		}
		s.deadlocks.Add(1)
	}
	if err != nil {
		return driver.Grant{}, wrap("transfer", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return driver.Grant{}, wrap("transfer", err)
	}
	if n == 1 {
		fence, err := res.LastInsertId()
		if err != nil || fence <= 0 {
			return driver.Grant{}, fmt.Errorf("mysqlstore: transfer applied but its fence is unreadable (%d): %v", fence, err)
		}
		return driver.Grant{Fence: uint64(fence), Holds: 1, TTL: ttl}, nil
	}
	return driver.Grant{}, s.refusedTransfer(ctx, key, df)
}

// refusedTransfer reads key's row after a transfer from df that changed
// nothing and returns why: ErrInvalid for a re-entered holding of df,
// NotHeld otherwise; if the read fails, its error (no sentinel: the Client
// then treats the outcome as unknown).
func (s *Store) refusedTransfer(ctx context.Context, key string, df []byte) error {
	var r row
	var us int64
	err := s.db.QueryRowContext(ctx, "SELECT owner, holds, fence, "+remaining+" FROM "+s.n.locks+" WHERE name = ?", []byte(key)).
		Scan(&r.owner, &r.holds, &r.fence, &us)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return driver.NotHeld(false)
	case err != nil:
		// The transfer changed nothing; why is unknown.
		return wrap("transfer refused, reading the key's state", err)
	}
	r.remain = time.Duration(us) * time.Microsecond
	switch {
	case r.mine(df) && r.holds > 1:
		return fmt.Errorf("%w: mysqlstore: transfer of a key held %d times (re-entered)", driver.ErrInvalid, r.holds)
	case r.mine(df):
		// Held once now: another call on from's token changed the row
		// between the two statements. Nothing was transferred.
		return fmt.Errorf("%w: mysqlstore: transfer refused: the holding changed during the call", driver.ErrInvalid)
	}
	return driver.NotHeld(r.taken(df))
}
