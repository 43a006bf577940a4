package mysqlstore

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// The Semaphore's schema and housekeeping; the operations are in
// semaphore.go.

// permitsDDL: one row per holding of permits, live or lately expired (a
// release deletes its row; acquisitions and the sweep delete expired
// ones). owner is the SHA-256 of the holder's token; lim the key's limit,
// the same on every live row of the key (stored by the acquisition that
// found none out); fence from <p>_fence, the lease table's sequence;
// expires_at on the database clock in UTC. A row with permits 0 and the
// epoch as expiry is what ExtendPermits leaves for a token that held
// nothing (expired: nobody's permits).
func (n names) permitsDDL() string {
	return "CREATE TABLE IF NOT EXISTS " + n.permits + ` (
  name VARBINARY(1024) NOT NULL,
  owner BINARY(32) NOT NULL,
  permits INT NOT NULL,
  lim INT NOT NULL,
  fence BIGINT UNSIGNED NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  PRIMARY KEY (name, owner),
  KEY expires_at (expires_at)
) ENGINE=InnoDB`
}

// semaphoresDDL: one anchor row per key with permits out (or lately), which
// every acquisition of the key locks first (INSERT ... ON DUPLICATE KEY
// UPDATE): the key's acquirers take turns, each counting what the ones
// before it committed. It holds no state; the sweep deletes anchors whose
// key has no holding left.
func (n names) semaphoresDDL() string {
	return "CREATE TABLE IF NOT EXISTS " + n.semaphores + ` (
  name VARBINARY(1024) NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB`
}

// sweepPermits cleans up to sweepKeysPerRun keys with expired holdings of
// permits, or an anchor without holdings, each under its anchor's lock
// (sweepUnderAnchors), as acquisitions take it: their expired holdings
// (re-checked under the row lock: a holding extended meanwhile stays), then
// the anchor if no holding is left. A schema without the Semaphore's tables
// (not migrated since) has nothing to sweep.
func (s *Store) sweepPermits(ctx context.Context) (int, error) {
	P, S := s.n.permits, s.n.semaphores
	return s.sweepUnderAnchors(ctx, anchorSweep{
		op: "sweep permits",
		keys: "(SELECT DISTINCT name FROM " + P + " WHERE expires_at <= " + now + " LIMIT ?)" +
			" UNION (SELECT s.name FROM " + S + " AS s LEFT JOIN " + P + " AS p ON p.name = s.name WHERE p.name IS NULL LIMIT ?)",
		anchor: anchorStmt(s.n),
		holds:  "DELETE FROM " + P + " WHERE name = ? AND expires_at <= " + now,
		drop:   "DELETE FROM " + S + " WHERE name = ? AND NOT EXISTS (SELECT 1 FROM " + P + " WHERE name = ?)",
	})
}

// sweepByKey reads up to sweepBatch primary keys (cols columns each) with
// read, then deletes them with del, whose %s is the list of tuple, one per
// key read.
func (s *Store) sweepByKey(ctx context.Context, read, del, tuple string, cols int) (int, error) {
	rows, err := s.db.QueryContext(ctx, read, sweepBatch)
	if errNumber(err) == erNoSuchTable {
		return 0, nil
	}
	if err != nil {
		return 0, wrap("sweep permits", err)
	}
	var args []any
	for rows.Next() {
		vals := make([]any, cols)
		ptrs := make([]any, cols)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			rows.Close()
			return 0, wrap("sweep permits", err)
		}
		args = append(args, vals...)
	}
	if err := rows.Close(); err != nil {
		return 0, wrap("sweep permits", err)
	}
	if len(args) == 0 {
		return 0, nil
	}
	list := strings.Repeat(tuple+", ", len(args)/cols-1) + tuple
	res, err := s.db.ExecContext(ctx, strings.Replace(del, "%s", list, 1), args...)
	if err != nil {
		if errNumber(err) == erDeadlock {
			s.deadlocks.Add(1)
		}
		return 0, wrap("sweep permits", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// inTx runs fn in a READ COMMITTED transaction (each statement reads what
// is committed when it starts) and commits it if fn returns true, else
// rolls it back; fn's error rolls back and is returned wrapped (as wrap
// does). A deadlock victim's transaction (rolled back by the server,
// counted in Deadlocks) is run again, up to three times in all.
func (s *Store) inTx(ctx context.Context, op string, fn func(tx *sql.Tx) (bool, error)) error {
	var err error
	for try := 0; try < 3; try++ {
		err = s.tryTx(ctx, fn)
		if errNumber(err) != erDeadlock {
			break
		}
		s.deadlocks.Add(1)
	}
	if err != nil {
		return wrap(op, err)
	}
	return nil
}

func (s *Store) tryTx(ctx context.Context, fn func(tx *sql.Tx) (bool, error)) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	commit, err := fn(tx)
	if err != nil || !commit {
		s.rollback(ctx, tx)
		return err
	}
	return tx.Commit()
}

// rollbackWait bounds a rollback (Store.rollback).
const rollbackWait = 5 * time.Second

// rollback ends tx within s.rollbackWait (rollbackWait), even after ctx
// ended. tx.Rollback has no context: a lost reply would block it forever
// unless the DSN sets readTimeout. So the ROLLBACK goes first as a
// statement with a context, which the driver enforces by closing the
// connection (the server then rolls back); tx.Rollback then tells
// database/sql (one more round trip on a live connection, none on a
// closed one) and is waited for only until the bound.
func (s *Store) rollback(ctx context.Context, tx *sql.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.rollbackWait)
	defer cancel()
	_, _ = tx.ExecContext(rctx, "ROLLBACK")
	done := make(chan struct{})
	go func() {
		_ = tx.Rollback()
		close(done)
	}()
	select {
	case <-done:
	case <-rctx.Done():
	}
}
