package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"example.com/dlock/driver"
)

// sweepBatch bounds one sweep's DELETE.
const sweepBatch = 500

// unreserved: the row has no fresh waiter mark (mark.go), so deleting it
// drops no reservation.
const unreserved = "NOT ((next_due > " + now + ") IS TRUE)"

// maybeSweep runs Sweep if SweepEvery has passed since this Store's last
// one. Its errors are dropped: the sweep is housekeeping, the call that
// triggered it has succeeded.
func (s *Store) maybeSweep(ctx context.Context) {
	s.sweepMu.Lock()
	due := time.Since(s.lastSweep) >= s.opts.SweepEvery
	if due {
		s.lastSweep = time.Now()
	}
	s.sweepMu.Unlock()
	if due {
		_, _ = s.Sweep(ctx)
	}
}

// Sweep deletes up to 500 rows that have been free (released or expired)
// for longer than Options.Retention and returns how many it deleted; a row
// reserved for a marked waiter stays until the mark goes stale. It
// first reads their names without locking, then deletes them by primary
// key, re-checking the expiry under the row lock: a row taken in between
// stays, and the lock order (primary key, then the expiry index) is the
// one Acquire takes, so the sweep cannot deadlock with it. On error it
// returns 0 with the error (ErrRefused for a missing schema, else the
// driver's): rows may have been deleted if the DELETE's answer was lost.
// It then cleans up to 50 keys of the Semaphore (expired holdings, and
// anchors left without holdings: sweepPermits), up to 500
// forgotten idempotency records (sweepRecords), and up to 500 rate limiter
// keys whose TAT passed more than Retention ago (sweepRates), and up to
// 50 keys of the read-write lock (expired holdings, and anchors left
// without holdings or mark: sweepRW).
func (s *Store) Sweep(ctx context.Context) (int, error) {
	n, err := s.sweepLocks(ctx)
	if err != nil {
		return n, err
	}
	m, err := s.sweepPermits(ctx)
	if n += m; err != nil {
		return n, err
	}
	m, err = s.sweepRecords(ctx)
	if n += m; err != nil {
		return n, err
	}
	m, err = s.sweepRates(ctx)
	if n += m; err != nil {
		return n, err
	}
	m, err = s.sweepRW(ctx)
	return n + m, err
}

// sweepLocks is Sweep's part on the lease table.
func (s *Store) sweepLocks(ctx context.Context) (int, error) {
	cutoff := s.opts.Retention.Microseconds()
	rows, err := s.db.QueryContext(ctx, "SELECT name FROM "+s.n.locks+
		" WHERE expires_at < "+now+" - INTERVAL ? MICROSECOND AND "+unreserved+" LIMIT ?", cutoff, sweepBatch)
	if err != nil {
		return 0, wrap("sweep", err)
	}
	var keys []any
	for rows.Next() {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return 0, wrap("sweep", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Close(); err != nil {
		return 0, wrap("sweep", err)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	q := "DELETE FROM " + s.n.locks + " WHERE name IN (?" + strings.Repeat(", ?", len(keys)-1) +
		") AND expires_at < " + now + " - INTERVAL ? MICROSECOND AND " + unreserved
	res, err := s.db.ExecContext(ctx, q, append(keys, cutoff)...)
	if err != nil {
		if errNumber(err) == erDeadlock {
			s.deadlocks.Add(1)
		}
		return 0, wrap("sweep", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Inspect reads key's row without locking it (a consistent read). The token
// is never known (the table keeps its digest); a free row reports its last
// fence until the sweep removes it. A free row reserved for a marked waiter
// (see Acquire) is reported free (Held false): nobody holds it, though an
// Acquire by another token is refused until the waiter takes it or the
// mark goes stale (within about 150 ms). An empty key or one over
// MaxKeyBytes returns driver.ErrInvalid before any I/O; a missing schema
// driver.ErrRefused; a failed read the driver's error, matching no
// sentinel.
func (s *Store) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if key == "" || len(key) > MaxKeyBytes {
		return driver.Info{}, fmt.Errorf("%w: mysqlstore: bad key length %d", driver.ErrInvalid, len(key))
	}
	var r row
	var us int64
	var meta []byte
	read := func(metaCol string) error {
		return s.db.QueryRowContext(ctx, "SELECT owner, holds, fence, "+remaining+", "+metaCol+" FROM "+s.n.locks+" WHERE name = ?", []byte(key)).
			Scan(&r.owner, &r.holds, &r.fence, &us, &meta)
	}
	err := read(metaExpr)
	if errNumber(err) == erBadField { // a table from before the meta column
		err = read("''")
	}
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return driver.Info{Remaining: -1}, nil
		}
		return driver.Info{}, wrap("inspect", err)
	}
	r.remain = time.Duration(us) * time.Microsecond
	return info(r, meta), nil
}

func info(r row, meta []byte) driver.Info {
	if r.remain <= 0 || r.holds <= 0 {
		return driver.Info{Fence: r.fence, Remaining: -1}
	}
	return driver.Info{Held: true, Holds: r.holds, Remaining: r.remain, Fence: r.fence, Meta: string(meta)}
}

// List calls fn for every held key starting with prefix, in key order,
// until fn returns false. It reads at most 10000 keys per call. Errors are
// as for Inspect; fn may have been called for some keys before one.
func (s *Store) List(ctx context.Context, prefix string, fn func(key string, info driver.Info) bool) error {
	cols := "name, owner, holds, fence, " + remaining + ", " + metaExpr
	rows, err := s.db.QueryContext(ctx, "SELECT "+cols+" FROM "+s.n.locks+
		" WHERE LEFT(name, ?) = ? AND expires_at > "+now+" AND holds > 0 ORDER BY name LIMIT 10000", len(prefix), []byte(prefix))
	if errNumber(err) == erBadField { // a table from before the meta column
		cols = "name, owner, holds, fence, " + remaining + ", ''"
		rows, err = s.db.QueryContext(ctx, "SELECT "+cols+" FROM "+s.n.locks+
			" WHERE LEFT(name, ?) = ? AND expires_at > "+now+" AND holds > 0 ORDER BY name LIMIT 10000", len(prefix), []byte(prefix))
	}
	if err != nil {
		return wrap("list", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, meta []byte
		var r row
		var us int64
		if err := rows.Scan(&name, &r.owner, &r.holds, &r.fence, &us, &meta); err != nil {
			return wrap("list", err)
		}
		r.remain = time.Duration(us) * time.Microsecond
		if !fn(string(name), info(r, meta)) {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return wrap("list", err)
	}
	return nil
}
