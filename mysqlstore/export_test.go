package mysqlstore

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"example.com/dlock/driver"
)

// ConnIDs returns the server ids of the connections the Session pins.
func (s *Session) ConnIDs() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for _, pc := range s.eng.Pins.Conns(false) {
		ids = append(ids, pc.C.id)
	}
	return ids
}

// WithEarlyFence makes s's Transfer take a fence drawn by a statement of its
// own before the UPDATE (which then waits for the row lock): the wrong
// design that TestTransferFenceOrder's control must catch. It keeps
// Transfer's arguments and its one statement: the early draw is a
// subquery on the sequence, evaluated once before the row is read.
func WithEarlyFence(s *Store) {
	s.transferSQL = "UPDATE " + s.n.locks + " AS l, (SELECT NEXTVAL(" + s.n.fence + ") AS f) AS early" +
		" SET l.fence = LAST_INSERT_ID(early.f), l.expires_at = " + now + " + INTERVAL ? MICROSECOND, l.owner = ?" +
		" WHERE l.name = ? AND l.owner = ? AND l.holds = 1 AND l.expires_at > " + now
}

// WithoutMark makes s's Acquire the statement before the waiter mark: no
// mark, no reservation (the fairness tests' control).
func WithoutMark(s *Store) {
	s.mark.off = true
	s.acquireSQL = acquireStmt(s.n, s.mark)
}

// WithMarkTimes sets the mark's hint bounds and least slack on s.
func WithMarkTimes(s *Store, minHint, maxHint, slack time.Duration) {
	s.mark = markCfg{minHint: minHint, maxHint: maxHint, slack: slack, div: 8}
	s.acquireSQL = acquireStmt(s.n, s.mark)
}

// WithPermitsRace makes s's AcquirePermits pause 20 ms between its read of
// the key's holdings and its insert (a SLEEP in the read), widening the
// window two acquirers could both count in; without the anchor, it also
// skips the lock on the key's anchor row: the wrong design that
// TestPermitsAnchorSerializesAcquirers' control must catch.
func WithPermitsRace(s *Store, anchor bool) {
	s.readPermitsSQL = strings.Replace(readPermitsStmt(s.n), "SELECT ", "SELECT SLEEP(0.02) + ", 1)
	if !anchor {
		s.anchorSQL = "DO ?"
	}
	s.acquirePermitsSQL = acquirePermitsStmt(s.n, s.anchorSQL, s.readPermitsSQL)
}

// WithoutPrune makes s's AcquirePermits skip expired holdings in its count
// without deleting them (its read reports none expired): the wrong design
// that TestPermitsExtensionInFlightIsCounted's control must catch.
func WithoutPrune(s *Store) {
	live := "expires_at > " + now
	s.readPermitsSQL = strings.Replace(readPermitsStmt(s.n), "COALESCE(SUM(NOT ("+live+")), 0)", "0", 1)
	if s.readPermitsSQL == readPermitsStmt(s.n) {
		panic("WithoutPrune: the read's expired column was not found")
	}
	s.acquirePermitsSQL = acquirePermitsStmt(s.n, s.anchorSQL, s.readPermitsSQL)
}

// WithoutFenceCheck makes s's CompleteRecordTx complete the record
// whoever owns it, for the negative control of the stale-executor test.
func WithoutFenceCheck(s *Store) { s.noFenceCheck = true }

// WithWaitingFoldedBegin makes s's BeginRecordTx wait for the record's row
// lock, as a plain INSERT does, for the negative control of the in-flight
// test: a duplicate then waits for the running transaction.
func WithWaitingFoldedBegin(s *Store) { s.foldedWaits = true }

// RacyAllowN is AllowN as two statements without a lock between them: a
// read of the key's TAT, driver.GCRA in Go, then a write of the new TAT
// (last writer wins). It is the wrong design that the exactness test's
// control must catch.
func (s *Store) RacyAllowN(ctx context.Context, key string, limit driver.RateLimit, n int) (driver.RateResult, error) {
	iv := int64((limit.Interval() + time.Microsecond - 1) / time.Microsecond)
	var tat, nowUS int64
	err := s.db.QueryRowContext(ctx, "SELECT COALESCE((SELECT tat FROM "+s.n.rates+" WHERE name = ?), 0), "+nowMicros, []byte(key)).Scan(&tat, &nowUS)
	if err != nil {
		return driver.RateResult{}, err
	}
	lim := driver.RateLimit{Rate: 1, Period: time.Duration(iv) * time.Microsecond, Burst: limit.Burst}
	r, next := driver.GCRA(time.UnixMicro(nowUS), time.UnixMicro(tat), lim, n)
	if r.Allowed == 0 {
		return r, nil
	}
	_, err = s.db.ExecContext(ctx, "INSERT INTO "+s.n.rates+" (name, tat, tag) VALUES (?, ?, 0) ON DUPLICATE KEY UPDATE tat = VALUES(tat)", []byte(key), next.UnixMicro())
	return r, err
}

// WithRWRace makes s's read-write lock acquisitions pause 20 ms between
// their read of the key's holdings and their write (a SLEEP in the read),
// widening the window two acquirers could both see the key free; without
// the anchor, it also skips the lock on the key's anchor row (and reads no
// mark): the wrong design that TestRWAnchorSerializesAcquirers' control
// must catch.
func WithRWRace(s *Store, anchor bool) {
	s.readRWSQL = strings.Replace(readRWStmt(s.n), "SELECT ", "SELECT SLEEP(0.02) + ", 1)
	if !anchor {
		s.rwAnchorSQL = "SELECT -1, ? = ?"
	}
}

// WithoutRWMark makes s's refused AcquireWrite leave no writer-waiting
// mark: the wrong design that TestRWRefusedWriterKeepsLaterReadersOut's
// control must catch.
func WithoutRWMark(s *Store) { s.rwNoMark = true }

// WithoutRWPrune makes s's read-write lock acquisitions skip expired
// holdings in their count without deleting them (no wait for an extension
// in flight): the wrong design that TestRWExtensionInFlightIsCounted's
// control must catch.
func WithoutRWPrune(s *Store) { s.rwNoPrune = true }

// InTx runs fn in s's acquisition transaction (inTx), with rollbacks
// bounded by wait instead of the default. For tests.
func InTx(ctx context.Context, s *Store, wait time.Duration, fn func(tx *sql.Tx) (bool, error)) error {
	s.rollbackWait = wait
	return s.inTx(ctx, "test", fn)
}
