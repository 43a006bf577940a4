package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"example.com/dlock/driver"
)

// noWait prefixes a write of the folded begin: it is refused at once
// (error 1205) rather than waiting for a row lock that another
// transaction holds, perhaps for the whole of a business transaction.
const noWait = "SET STATEMENT innodb_lock_wait_timeout = 0 FOR "

// BeginRecordTx is BeginRecord within tx (the folded SQL mode,
// myguard.DoTx): the record begun is tx's, seen by no other call before
// the commit. It never waits for a lock: a record that another transaction
// holds is answered in flight at once (Remaining negative); a committed one
// is read under a shared lock and decided as by BeginRecord. Complete the
// record in tx and commit, or roll back (always, on any other answer or an
// error). Errors as BeginRecord.
func (s *Store) BeginRecordTx(ctx context.Context, tx *sql.Tx, id driver.RecordID, token, fingerprint string, lease, retention time.Duration) (driver.RecordBegin, error) {
	if tx == nil {
		return driver.RecordBegin{}, fmt.Errorf("%w: mysqlstore: nil transaction", driver.ErrInvalid)
	}
	if err := driver.ValidateRecord(id, token, fingerprint, lease, retention); err != nil {
		return driver.RecordBegin{}, err
	}
	if err := s.checkRecord(ctx); err != nil {
		return driver.RecordBegin{}, err
	}
	d, fp := digest(token), []byte(fingerprint)
	b := driver.RecordBegin{State: driver.RecordStarted, Remaining: lease}
	err := s.insertRecord(ctx, tx, id, d, fp, ceilMicros(lease), ceilMicros(retention), s.noWait(), &b.Fence)
	if errNumber(err) == erDupKey { // a committed record: the insert holds its row's shared lock
		var refusal error
		if _, err = s.beginIn(ctx, tx, id, d, fp, lease, retention, s.noWait(), &b, &refusal); err == nil && refusal != nil {
			return driver.RecordBegin{}, refusal
		}
	}
	switch n := errNumber(err); {
	case n == erLockWait || n == erDeadlock || err == errDupRecord:
		return driver.RecordBegin{State: driver.RecordInFlight, Remaining: -1}, nil
	case err != nil:
		return driver.RecordBegin{}, wrap("begin record in the transaction", err)
	}
	return b, nil
}

// noWait is the prefix of the folded begin's writes: noWait, or nothing
// for a store of a negative control (see export_test.go), whose folded
// begin waits for the row's lock.
func (s *Store) noWait() string {
	if s.foldedWaits {
		return ""
	}
	return noWait
}
