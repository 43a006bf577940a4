package mysqlstore

import (
	"context"
	"database/sql"
)

// The RWMutex's schema and housekeeping; the operations are in rwlock.go.

// rwHoldsDDL: one row per holding of a read-write lock key, live or lately
// expired (a release deletes its row; acquisitions and the sweep delete
// expired ones). owner is the SHA-256 of the holder's token; mode 1 for a
// read holding, 2 for the write holding; fence from <p>_fence, the lease
// table's sequence; expires_at on the database clock in UTC. It has no
// index but the primary key, so that every statement locks its rows in one
// order (primary key): an index on expires_at let an acquisition's DELETE
// lock through it (index, then row) while a release locked the row, then
// the index entry, and MariaDB reported deadlocks
// (TestRWMixedTrafficNoDeadlockNoOverlap). The sweep's unlocked read
// scans the table, which holds only live and lately expired holdings.
func (n names) rwHoldsDDL() string {
	return "CREATE TABLE IF NOT EXISTS " + n.rwHolds + ` (
  name VARBINARY(1024) NOT NULL,
  owner BINARY(32) NOT NULL,
  mode TINYINT NOT NULL,
  fence BIGINT UNSIGNED NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  PRIMARY KEY (name, owner)
) ENGINE=InnoDB`
}

// rwKeysDDL: one anchor row per key in use (or lately), which every
// acquisition of the key locks first (INSERT ... ON DUPLICATE KEY UPDATE):
// the key's acquirers take turns, each seeing what the ones before it
// committed. It also holds the writer-waiting mark: mark_owner, the digest
// of the writer refused last, and mark_until, when its mark ends (the
// epoch: no mark). The sweep deletes anchors without holdings whose mark
// has ended.
func (n names) rwKeysDDL() string {
	return "CREATE TABLE IF NOT EXISTS " + n.rwKeys + ` (
  name VARBINARY(1024) NOT NULL,
  mark_owner BINARY(32) NULL,
  mark_until DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00',
  PRIMARY KEY (name)
) ENGINE=InnoDB`
}

// rwSweepKeys bounds the keys one sweep visits (each is a transaction of
// its own, six statements).
const rwSweepKeys = 50

// sweepRW visits up to rwSweepKeys keys that have expired holdings, or an
// anchor with no holding and an ended mark (an unlocked read), and cleans
// each in a transaction of its own that first locks the key's anchor, as
// acquisitions do: it deletes the key's expired holdings (re-checked under
// their row locks: a holding extended meanwhile stays), then the anchor if
// no holding is left and its mark has ended. It returns how many rows it
// deleted. Taking the anchor keeps the sweep from deleting a key's rows
// beside an acquisition of the key: an earlier sweep that deleted by key
// without it deadlocked with acquisitions (an INSERT waiting on the next-key
// lock of a row the sweep was deleting, while the sweep waited on a row the
// acquisition had deleted). A schema without these tables (not migrated
// since) has nothing to sweep.
func (s *Store) sweepRW(ctx context.Context) (int, error) {
	H, K := s.n.rwHolds, s.n.rwKeys
	rows, err := s.db.QueryContext(ctx, "(SELECT DISTINCT name FROM "+H+" WHERE expires_at <= "+now+" LIMIT ?)"+
		" UNION (SELECT k.name FROM "+K+" AS k LEFT JOIN "+H+" AS h ON h.name = k.name"+
		" WHERE h.name IS NULL AND k.mark_until <= "+now+" LIMIT ?)", rwSweepKeys, rwSweepKeys)
	if errNumber(err) == erNoSuchTable {
		return 0, nil
	}
	if err != nil {
		return 0, wrap("sweep rw", err)
	}
	var keys [][]byte
	for rows.Next() && len(keys) < rwSweepKeys {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return 0, wrap("sweep rw", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Close(); err != nil {
		return 0, wrap("sweep rw", err)
	}
	gone := 0
	for _, k := range keys {
		n, err := s.sweepRWKey(ctx, k)
		if gone += n; err != nil {
			return gone, err
		}
	}
	return gone, nil
}

// sweepRWKey cleans one key under its anchor's lock (see sweepRW).
func (s *Store) sweepRWKey(ctx context.Context, key []byte) (int, error) {
	H, K := s.n.rwHolds, s.n.rwKeys
	gone := 0
	err := s.inTx(ctx, "sweep rw", func(tx *sql.Tx) (bool, error) {
		gone = 0
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+K+" (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name", key); err != nil {
			return false, err
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM "+H+" WHERE name = ? AND expires_at <= "+now, key)
		if err != nil {
			return false, err
		}
		n, _ := res.RowsAffected()
		// The anchor's lock keeps acquisitions of the key out: no holding
		// can be added before this commits.
		res, err = tx.ExecContext(ctx, "DELETE FROM "+K+" WHERE name = ? AND mark_until <= "+now+
			" AND NOT EXISTS (SELECT 1 FROM "+H+" WHERE name = ?)", key, key)
		if err != nil {
			return false, err
		}
		m, _ := res.RowsAffected()
		gone = int(n + m)
		return true, nil
	})
	return gone, err
}
