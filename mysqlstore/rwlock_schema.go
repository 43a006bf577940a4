package mysqlstore

import "context"

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
// Transactions that lock several of a key's rows (acquisitions, the sweep)
// take the key's anchor first; extend and release lock one row and wait
// for nothing while holding it; so no cycle of waits forms.
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

// sweepRW cleans up to sweepKeysPerRun keys with expired read-write lock
// holdings, or an anchor with no holding and an ended mark, each under its
// anchor's lock (sweepUnderAnchors): their expired holdings, then the anchor
// if no holding is left and its mark has ended.
func (s *Store) sweepRW(ctx context.Context) (int, error) {
	H, K := s.n.rwHolds, s.n.rwKeys
	return s.sweepUnderAnchors(ctx, anchorSweep{
		op: "sweep rw",
		keys: "(SELECT DISTINCT name FROM " + H + " WHERE expires_at <= " + now + " LIMIT ?)" +
			" UNION (SELECT k.name FROM " + K + " AS k LEFT JOIN " + H + " AS h ON h.name = k.name" +
			" WHERE h.name IS NULL AND k.mark_until <= " + now + " LIMIT ?)",
		anchor: "INSERT INTO " + K + " (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name",
		holds:  "DELETE FROM " + H + " WHERE name = ? AND expires_at <= " + now,
		drop: "DELETE FROM " + K + " WHERE name = ? AND mark_until <= " + now +
			" AND NOT EXISTS (SELECT 1 FROM " + H + " WHERE name = ?)",
	})
}
