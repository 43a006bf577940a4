package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The RWMutex on the lease table: holdings are rows of <prefix>_rwlocks,
// one per (key, token digest), each with its own mode, expiry on the
// database clock and fence from the lease table's sequence; a refused
// writer's mark is a row of mode 0 (rwTemplate shows the table and the
// acquisition function). Each call is one statement, one round trip once
// prepared. A release and a downgrade send NOTIFY on the table's channel,
// which the store's listener serves (RWNotifier).

var (
	_ driver.RWMutex     = (*Store)(nil)
	_ driver.RWInspector = (*Store)(nil)
	_ driver.RWNotifier  = (*Store)(nil)
)

// rwStatements are the RWMutex's SQL for one set of names.
type rwStatements struct {
	acquire, extend, release, inspect, sweep string
}

func newRWStatements(n names) rwStatements {
	return rwStatements{
		acquire: fmt.Sprintf(`SELECT o_status, o_fence, o_readers, o_held, o_mark, o_remaining_us FROM %s($1, $2, $3, $4, $5)`, n.acquireRW),

		// extend moves a live holding's expiry (never a mark's); the
		// readers are counted in the statement's snapshot.
		extend: fmt.Sprintf(`UPDATE %[1]s AS r SET expires_at = `+ttlExpr+`
WHERE r.name = $1 AND r.owner = $2 AND r.mode > 0 AND r.expires_at > now()
RETURNING r.mode, r.fence, (SELECT count(*) FROM %[1]s AS q WHERE q.name = $1 AND q.mode = 1 AND q.expires_at > now())`, n.rw),

		// release deletes a live holding and sends NOTIFY on the table's
		// channel with the key, delivered at commit.
		release: fmt.Sprintf(`DELETE FROM %[1]s AS r WHERE r.name = $1 AND r.owner = $2 AND r.mode > 0 AND r.expires_at > now()
RETURNING (SELECT count(*) FROM (SELECT pg_notify($3, r.name)) AS n)`, n.rw),

		// inspect lists the key's live rows, marks included (mode 0).
		inspect: fmt.Sprintf(`SELECT r.mode, r.fence, (extract(epoch FROM r.expires_at - now()) * 1000000)::bigint
FROM %[1]s AS r WHERE r.name = $1 AND r.expires_at > now()`, n.rw),

		sweep: fmt.Sprintf(`DELETE FROM %[1]s AS r USING (
  SELECT name, owner FROM %[1]s WHERE expires_at <= now() LIMIT $1 FOR UPDATE SKIP LOCKED
) AS c WHERE r.name = c.name AND r.owner = c.owner AND r.expires_at <= now()`, n.rw),
	}
}

// checkRW validates an RWMutex call's arguments before any I/O, and that
// the store is open and ctx not done.
func (s *Store) checkRW(ctx context.Context, key string, ttl time.Duration) error {
	if err := driver.ValidateRW(key, ttl); err != nil {
		return err
	}
	if err := s.check(key, ttl); err != nil {
		return err
	}
	return ctx.Err()
}

// AcquireRead implements driver.RWMutex in one statement, a call of the
// schema's <prefix>_rwlocks_acquire: under a transaction-scoped advisory
// lock on the key it deletes the key's expired rows, then gives token a
// read holding with a fence from the lease table's sequence unless a
// writer holds the key or a writer's mark is live. A reader's call is a
// re-entry (same fence, expiry the later of the current one and ttl from
// now), the writer's a downgrade in place. A refusal is a
// *driver.RWTakenError and changes nothing but the deletion of expired
// rows. Bad arguments match driver.ErrInvalid before any I/O (also a NUL
// byte in key, a ttl under a millisecond, a closed store); a done ctx
// returns its error; a missing function (run Migrate) matches
// driver.ErrRefused; an error matching no sentinel leaves the outcome
// unknown.
func (s *Store) AcquireRead(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	return s.acquireRW(ctx, key, token, ttl, driver.RWRead)
}

// AcquireWrite implements driver.RWMutex as AcquireRead does: token gets
// the write holding if no holding is live (its own mark becoming the
// holding); otherwise it leaves or renews its mark for
// driver.WriterWaitTTL on the database clock and returns a
// *driver.RWTakenError. The writer's call is a re-entry; a reader's
// returns driver.ErrUpgrade, changing nothing. Other errors as AcquireRead.
func (s *Store) AcquireWrite(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	return s.acquireRW(ctx, key, token, ttl, driver.RWWrite)
}

func (s *Store) acquireRW(ctx context.Context, key, token string, ttl time.Duration, mode driver.RWMode) (driver.RWGrant, error) {
	if err := s.checkRW(ctx, key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	s.startSweep()
	var (
		status, fence, readers, held, remaining int64
		mark                                    bool
	)
	args := []any{key, digest(token), int(mode), micros(ttl), micros(driver.WriterWaitTTL)}
	if err := s.db.queryRow(ctx, s.rwsql.acquire, args, &status, &fence, &readers, &held, &mark, &remaining); err != nil {
		return driver.RWGrant{}, wrap("acquire "+mode.String(), err)
	}
	switch status {
	case 1:
		return driver.RWGrant{Mode: mode, Fence: uint64(fence), Readers: int(readers), TTL: ttl}, nil
	case 0:
		e := &driver.RWTakenError{Held: driver.RWMode(held), Readers: int(readers), WriterWaiting: mark, Remaining: max(0, time.Duration(remaining)*time.Microsecond)}
		if e.Held == driver.RWWrite {
			e.Readers = 0
		}
		return driver.RWGrant{}, e
	case -1:
		return driver.RWGrant{}, driver.ErrUpgrade
	}
	return driver.RWGrant{}, fmt.Errorf("pgstore: acquire %v: unexpected status %d", mode, status)
}

// ExtendRW implements driver.RWMutex in one statement: token's live
// holding of key expires ttl from now on the database clock, shorter or
// longer; other holdings are untouched. If token holds nothing of key (a
// mark is not a holding) it changes nothing and returns
// driver.NotHeld(false) (ErrExpired). Other errors as AcquireRead.
func (s *Store) ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (driver.RWGrant, error) {
	if err := s.checkRW(ctx, key, ttl); err != nil {
		return driver.RWGrant{}, err
	}
	var mode, fence, readers int64
	err := s.db.queryRow(ctx, s.rwsql.extend, []any{key, digest(token), micros(ttl)}, &mode, &fence, &readers)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.RWGrant{}, driver.NotHeld(false)
	}
	if err != nil {
		return driver.RWGrant{}, wrap("extend rw", err)
	}
	g := driver.RWGrant{Mode: driver.RWMode(mode), Fence: uint64(fence), Readers: int(readers), TTL: ttl}
	if g.Mode == driver.RWWrite {
		g.Readers = 0
	}
	return g, nil
}

// ReleaseRW implements driver.RWMutex in one statement: it deletes token's
// live holding of key. If token holds nothing of key it changes nothing
// and returns driver.NotHeld(false) (ErrExpired); a statement is never
// resent once it may have reached the server, so a repeated release
// answers NotHeld. It sends NOTIFY on the table's channel
// (<prefix>_rwlocks) with the key, delivered to listeners at commit. Other
// errors as AcquireRead.
func (s *Store) ReleaseRW(ctx context.Context, key, token string) error {
	if err := s.checkRW(ctx, key, time.Millisecond); err != nil {
		return err
	}
	return s.releaseHolding(ctx, "release rw", s.rwsql.release, key, token, s.names.rw)
}

// SubscribeRW implements driver.RWNotifier on the store's listener (see
// Subscribe: the same connection also listens on the read-write lock's
// channel): once it returns, every ReleaseRW of key that commits, and
// every downgrade, sends a value. A lease that ends without a release
// sends nothing. Its errors are Subscribe's, without the mark.
func (s *Store) SubscribeRW(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return s.subscribeFamily(ctx, key, rwSub(key))
}

// rwSub is the listener's subscription key of a read-write lock key: a NUL
// byte, "rw", a NUL byte (no lock key holds one; a Semaphore key's is one
// NUL byte and the key) and the key.
func rwSub(key string) string { return "\x00rw\x00" + key }

// InspectRW implements driver.RWInspector in one unlocked read: each live
// holding's mode, fence and time left, with Token "" (the table keeps
// digests), and the time left of the latest live mark. A free key is not
// an error. Bad keys match driver.ErrInvalid before any I/O; a missing
// table driver.ErrRefused.
func (s *Store) InspectRW(ctx context.Context, key string) (driver.RWInfo, error) {
	if err := driver.ValidateKey(key); err != nil {
		return driver.RWInfo{}, err
	}
	if err := checkKey(key); err != nil {
		return driver.RWInfo{}, err
	}
	var info driver.RWInfo
	err := s.db.query(ctx, s.rwsql.inspect, []any{key}, func(scan func(...any) error) (bool, error) {
		var mode, fence, left int64
		if err := scan(&mode, &fence, &left); err != nil {
			return false, err
		}
		d := time.Duration(left) * time.Microsecond
		if mode == 0 {
			info.WriterWaiting = max(info.WriterWaiting, d)
			return true, nil
		}
		info.Mode = driver.RWMode(mode)
		info.Holders = append(info.Holders, driver.RWHolder{Mode: info.Mode, Fence: uint64(fence), Remaining: d})
		return true, nil
	})
	if err != nil {
		return driver.RWInfo{}, wrap("inspect rw", err)
	}
	return info, nil
}

// sweepRW deletes expired holdings and marks in batches, as Sweep does for
// the lease table. A schema without the table (made before it, not
// migrated again) has nothing to sweep.
func (s *Store) sweepRW(ctx context.Context) (int64, error) {
	var total int64
	for range sweepRounds {
		n, err := s.db.exec(ctx, s.rwsql.sweep, sweepBatch)
		total += n
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42P01" {
			return total, nil
		}
		if err != nil {
			return total, wrap("sweep rw", err)
		}
		if n < sweepBatch {
			break
		}
	}
	return total, nil
}
