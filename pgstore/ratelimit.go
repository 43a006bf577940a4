package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5/pgconn"
)

// The RateLimiter: one row of <prefix>_rates per key, its TAT in µs on the
// database clock (ratesTemplate shows the table and the decision
// function). Each decision is one statement, one round trip once
// prepared.

var _ driver.RateLimiter = (*Store)(nil)

// rateStatements are the RateLimiter's SQL for one set of names.
type rateStatements struct {
	allow, sweep string
}

// nowMicros is the database clock in µs since the Unix epoch: now(), the
// start of the statement's transaction.
const nowMicros = `(extract(epoch FROM now()) * 1000000)::bigint`

func newRateStatements(n names) rateStatements {
	return rateStatements{
		allow: fmt.Sprintf(`SELECT o_allowed, o_tat, o_now FROM %s($1, $2, $3, $4)`, n.allowRate),

		// sweep deletes up to $1 keys whose TAT has passed (as fresh as
		// a key without a row), skipping rows a decision holds locked;
		// the DELETE re-checks the TAT on a row admitted meanwhile.
		sweep: fmt.Sprintf(`DELETE FROM %[1]s AS r USING (
  SELECT name FROM %[1]s WHERE tat <= `+nowMicros+` LIMIT $1 FOR UPDATE SKIP LOCKED
) AS c WHERE r.name = c.name AND r.tat <= `+nowMicros, n.rates),
	}
}

// AllowN implements driver.RateLimiter in one statement, a call of the
// schema's <prefix>_rates_allow, on the database clock (now(): the
// statement's start; the interval is rounded up to a µs): n of key's
// budget under limit, all or none (driver.GCRA). An admitted call moves
// the key's TAT on (a row of <prefix>_rates, created if missing); a denied
// one writes nothing. Bad arguments (driver.ValidateRate, a NUL byte in
// key) and a closed store match driver.ErrInvalid before any I/O; a done
// ctx returns its error. A missing function (run Migrate) matches
// driver.ErrRefused; an error matching no sentinel leaves the outcome
// unknown.
func (s *Store) AllowN(ctx context.Context, key string, limit driver.RateLimit, n int) (driver.RateResult, error) {
	if err := driver.ValidateRate(key, limit, n); err != nil {
		return driver.RateResult{}, err
	}
	if err := s.checkOpen(key); err != nil {
		return driver.RateResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.RateResult{}, err
	}
	s.startSweep()
	iv := micros(limit.Interval())
	var allowed bool
	var tat, now int64
	if err := s.db.queryRow(ctx, s.ratesql.allow, []any{key, iv, limit.Burst, n}, &allowed, &tat, &now); err != nil {
		return driver.RateResult{}, wrap("allow", err)
	}
	return rateResult(allowed, tat, now, iv, limit.Burst, n)
}

// rateResult is the answer to a decision the database made at now (µs)
// that left the key's TAT at tat: driver.GCRA replayed on the TAT before
// the call, which must reach the same decision.
func rateResult(allowed bool, tat, now, iv int64, burst, n int) (driver.RateResult, error) {
	lim := driver.RateLimit{Rate: 1, Period: time.Duration(iv) * time.Microsecond, Burst: burst}
	before := tat
	if allowed {
		before -= int64(n) * iv
	}
	r, next := driver.GCRA(time.UnixMicro(now), time.UnixMicro(before), lim, n)
	if (r.Allowed == n) != allowed || next.UnixMicro() != tat {
		return driver.RateResult{}, fmt.Errorf("pgstore: allow: the database's decision (admitted %v, TAT %d at %d µs) is not GCRA's", allowed, tat, now)
	}
	return r, nil
}

// checkOpen rejects a key PostgreSQL's text cannot hold and calls on a
// closed store, before any I/O.
func (s *Store) checkOpen(key string) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errClosed()
	}
	return checkKey(key)
}

// sweepRates deletes passed TATs in batches, as Sweep does for the lease
// table. A schema without the rates table (made before it, not migrated
// again) has nothing to sweep.
func (s *Store) sweepRates(ctx context.Context) (int64, error) {
	var total int64
	for range sweepRounds {
		n, err := s.db.exec(ctx, s.ratesql.sweep, sweepBatch)
		total += n
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42P01" {
			return total, nil
		}
		if err != nil {
			return total, wrap("sweep rates", err)
		}
		if n < sweepBatch {
			break
		}
	}
	return total, nil
}
