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

// The Semaphore: holdings of permits are rows of <prefix>_permits, one per
// (key, token digest), each with its own expiry on the database clock and a
// fence from the lease table's sequence (permitsTemplate shows the table
// and the acquisition function). Each call is one statement, one round
// trip once prepared.

var (
	_ driver.Semaphore      = (*Store)(nil)
	_ driver.PermitNotifier = (*Store)(nil)
)

// permitStatements are the Semaphore's SQL for one set of names.
type permitStatements struct {
	acquire, extend, release, sweep string
}

func newPermitStatements(n names) permitStatements {
	return permitStatements{
		acquire: fmt.Sprintf(`SELECT o_status, o_fence, o_used, o_lim, o_remaining_us FROM %s($1, $2, $3, $4, $5)`, n.acquirePermits),

		// extend moves a live holding's expiry; Used counts the key's
		// live holdings in the statement's snapshot (this one included).
		extend: fmt.Sprintf(`UPDATE %[1]s AS p SET expires_at = `+ttlExpr+`
WHERE p.name = $1 AND p.owner = $2 AND p.expires_at > now()
RETURNING p.fence, p.permits, (SELECT coalesce(sum(q.permits), 0) FROM %[1]s AS q WHERE q.name = $1 AND q.expires_at > now())`, n.permits),

		// release deletes a live holding and sends NOTIFY on the permits
		// channel with the key, delivered when the statement commits. No
		// row: the token holds nothing.
		release: fmt.Sprintf(`DELETE FROM %[1]s AS p WHERE p.name = $1 AND p.owner = $2 AND p.expires_at > now()
RETURNING (SELECT count(*) FROM (SELECT pg_notify($3, p.name)) AS n)`, n.permits),

		// sweep deletes up to $1 expired holdings, skipping rows another
		// statement holds locked; the DELETE re-checks the expiry on a row
		// extended meanwhile.
		sweep: fmt.Sprintf(`DELETE FROM %[1]s AS p USING (
  SELECT name, owner FROM %[1]s WHERE expires_at <= now() LIMIT $1 FOR UPDATE SKIP LOCKED
) AS c WHERE p.name = c.name AND p.owner = c.owner AND p.expires_at <= now()`, n.permits),
	}
}

// checkPermits validates an AcquirePermits' arguments (or, with n = k = 1,
// an ExtendPermits') before any I/O, and that the store is open and ctx
// not done.
func (s *Store) checkPermits(ctx context.Context, key string, n, k int, ttl time.Duration) error {
	if err := driver.ValidatePermits(key, n, k, ttl); err != nil {
		return err
	}
	if err := s.check(key, ttl); err != nil {
		return err
	}
	return ctx.Err()
}

// AcquirePermits implements driver.Semaphore in one statement, a call of
// the schema's <prefix>_permits_acquire: under a transaction-scoped
// advisory lock on the key it deletes the key's expired holdings, counts
// the live ones and adds token's holding of k permits, with a fence from
// the lease table's sequence, if k are free (n becomes the key's limit if
// none is out). A token holding k permits already gets its holding back
// (same fence, expiry the later of the current one and ttl from now).
// Refusals change nothing but the deletion of expired holdings: a
// *driver.PermitsTakenError with the earliest expiry, a
// *driver.LimitMismatchError, an error matching driver.ErrInvalid for bad
// arguments (before any I/O: also a NUL byte in key, a ttl under a
// millisecond, a closed store) or another k. A done ctx returns its error
// before any I/O; a missing function (run Migrate) matches
// driver.ErrRefused; an error matching no sentinel leaves the outcome
// unknown.
func (s *Store) AcquirePermits(ctx context.Context, key, token string, n, k int, ttl time.Duration) (driver.PermitGrant, error) {
	if err := s.checkPermits(ctx, key, n, k, ttl); err != nil {
		return driver.PermitGrant{}, err
	}
	s.startSweep()
	var status, fence, used, lim, remaining int64
	err := s.db.queryRow(ctx, s.psql.acquire, []any{key, digest(token), n, k, micros(ttl)}, &status, &fence, &used, &lim, &remaining)
	if err != nil {
		return driver.PermitGrant{}, wrap("acquire permits", err)
	}
	switch status {
	case 1:
		return driver.PermitGrant{Fence: uint64(fence), Permits: k, Used: int(used), TTL: ttl}, nil
	case 0:
		return driver.PermitGrant{}, &driver.PermitsTakenError{Used: int(used), Limit: int(lim), Remaining: max(0, time.Duration(remaining)*time.Microsecond)}
	case -1:
		return driver.PermitGrant{}, &driver.LimitMismatchError{Stored: int(lim), Asked: n}
	case -2:
		return driver.PermitGrant{}, fmt.Errorf("%w: pgstore: the token holds %d permits of the key, asked for %d", driver.ErrInvalid, used, k)
	}
	return driver.PermitGrant{}, fmt.Errorf("pgstore: acquire permits: unexpected status %d", status)
}

// ExtendPermits implements driver.Semaphore in one statement: token's live
// holding of key expires ttl from now on the database clock, shorter or
// longer; other holdings are untouched. If token holds no live permit of
// key it changes nothing and returns driver.NotHeld(false) (ErrExpired).
// Other errors as AcquirePermits.
func (s *Store) ExtendPermits(ctx context.Context, key, token string, ttl time.Duration) (driver.PermitGrant, error) {
	if err := s.checkPermits(ctx, key, 1, 1, ttl); err != nil {
		return driver.PermitGrant{}, err
	}
	var fence, permits, used int64
	err := s.db.queryRow(ctx, s.psql.extend, []any{key, digest(token), micros(ttl)}, &fence, &permits, &used)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.PermitGrant{}, driver.NotHeld(false)
	}
	if err != nil {
		return driver.PermitGrant{}, wrap("extend permits", err)
	}
	return driver.PermitGrant{Fence: uint64(fence), Permits: int(permits), Used: int(used), TTL: ttl}, nil
}

// ReleasePermits implements driver.Semaphore in one statement: it deletes
// token's live holding of key and sends NOTIFY on the permits channel
// (<prefix>_permits) with the key, delivered to listeners at commit. If
// token holds no live permit of key it changes nothing and returns
// driver.NotHeld(false) (ErrExpired). A statement is never resent by pgx
// or database/sql once it may have reached the server, so there is no
// resent release to recognise: a repeated release answers NotHeld. Other
// errors as AcquirePermits.
func (s *Store) ReleasePermits(ctx context.Context, key, token string) error {
	if err := s.checkPermits(ctx, key, 1, 1, time.Millisecond); err != nil {
		return err
	}
	return s.releaseHolding(ctx, "release permits", s.psql.release, key, token, s.names.permits)
}

// releaseHolding runs q, a release function of a family table that
// notifies channel: driver.NotHeld(false) when it returns no row (token
// held nothing of key), else nil or the error wrapped as op.
func (s *Store) releaseHolding(ctx context.Context, op, q, key, token, channel string) error {
	var notified int64
	err := s.db.queryRow(ctx, q, []any{key, digest(token), channel}, &notified)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.NotHeld(false)
	}
	if err != nil {
		return wrap(op, err)
	}
	return nil
}

// SubscribePermits implements driver.PermitNotifier on the store's
// listener (see Subscribe: the same connection also listens on the
// permits channel): once it returns, every ReleasePermits of key that
// commits sends a value (every release sends NOTIFY: there is no waiter
// mark, unlike the lease table's). A lease that ends without a release
// sends nothing. Its errors are Subscribe's, without the mark.
func (s *Store) SubscribePermits(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return s.subscribeFamily(ctx, key, permitsSub(key))
}

// subscribeFamily checks key and subscribes the store's listener to sub,
// the family subscription key of key.
func (s *Store) subscribeFamily(ctx context.Context, key, sub string) (<-chan struct{}, func(), error) {
	if err := driver.ValidateKey(key); err != nil {
		return nil, nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, nil, err
	}
	return s.lis.subscribe(ctx, sub)
}

// permitsSub is the listener's subscription key of a Semaphore key: a NUL
// byte (which no lock key holds) and the key.
func permitsSub(key string) string { return "\x00" + key }

// sweepPermits deletes expired holdings in batches, as Sweep does for the
// lease table. A schema without the permits table (made before it, not
// migrated again) has nothing to sweep.
func (s *Store) sweepPermits(ctx context.Context) (int64, error) {
	var total int64
	for range sweepRounds {
		n, err := s.db.exec(ctx, s.psql.sweep, sweepBatch)
		total += n
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42P01" {
			return total, nil
		}
		if err != nil {
			return total, wrap("sweep permits", err)
		}
		if n < sweepBatch {
			break
		}
	}
	return total, nil
}
