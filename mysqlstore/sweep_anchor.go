package mysqlstore

import (
	"context"
	"database/sql"
)

// anchorSweep is what sweepUnderAnchors needs of a primitive whose
// acquisitions lock a per-key anchor row first (the Semaphore, the
// RWMutex): the statements, each taking the key where it has a ?.
type anchorSweep struct {
	op string
	// keys reads (unlocked) up to ? keys with expired holdings or an
	// anchor that may go, twice (?, ?: the bound for each part).
	keys string
	// anchor locks the key's anchor row, creating it if missing; holds
	// deletes the key's expired holdings; drop deletes the anchor if the
	// key has no holding left (key, key).
	anchor, holds, drop string
}

// sweepKeysPerRun bounds the keys one sweep visits per primitive (each is
// a transaction of its own, six statements).
const sweepKeysPerRun = 50

// sweepUnderAnchors visits up to sweepKeysPerRun keys that w.keys finds and
// cleans each in a transaction of its own that first locks the key's anchor,
// as acquisitions do: it deletes the key's expired holdings (re-checked
// under their row locks: a holding extended meanwhile stays), then the
// anchor if w.drop finds it unused. It returns how many rows it deleted.
// Taking the anchor keeps the sweep from deleting a key's rows beside an
// acquisition of the key: a sweep that deleted by key without it
// deadlocked with acquisitions (an INSERT waiting on the next-key lock of a
// row the sweep was deleting, while the sweep waited on a row the
// acquisition had deleted). Tables that do not exist (not migrated since)
// have nothing to sweep.
func (s *Store) sweepUnderAnchors(ctx context.Context, w anchorSweep) (int, error) {
	rows, err := s.db.QueryContext(ctx, w.keys, sweepKeysPerRun, sweepKeysPerRun)
	if errNumber(err) == erNoSuchTable {
		return 0, nil
	}
	if err != nil {
		return 0, wrap(w.op, err)
	}
	var keys [][]byte
	for rows.Next() && len(keys) < sweepKeysPerRun {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return 0, wrap(w.op, err)
		}
		keys = append(keys, k)
	}
	if err := rows.Close(); err != nil {
		return 0, wrap(w.op, err)
	}
	gone := 0
	for _, k := range keys {
		n, err := s.sweepKey(ctx, w, k)
		if gone += n; err != nil {
			return gone, err
		}
	}
	return gone, nil
}

// sweepKey cleans one key under its anchor's lock (see sweepUnderAnchors).
func (s *Store) sweepKey(ctx context.Context, w anchorSweep, key []byte) (int, error) {
	gone := 0
	err := s.inTx(ctx, w.op, func(tx *sql.Tx) (bool, error) {
		gone = 0
		if _, err := tx.ExecContext(ctx, w.anchor, key); err != nil {
			return false, err
		}
		// The anchor's lock keeps acquisitions of the key out: no holding
		// can be added before this commits.
		for _, q := range []struct {
			sql  string
			args []any
		}{{w.holds, []any{key}}, {w.drop, []any{key, key}}} {
			res, err := tx.ExecContext(ctx, q.sql, q.args...)
			if err != nil {
				return false, err
			}
			n, _ := res.RowsAffected()
			gone += int(n)
		}
		return true, nil
	})
	return gone, err
}
