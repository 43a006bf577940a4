package mysqlstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"example.com/dlock/driver"
)

// The RateLimiter: one row of <p>_rates per key, its TAT in µs on the
// database clock. A decision is one INSERT ... ON DUPLICATE KEY UPDATE
// ... RETURNING in autocommit: atomic under the row's lock, and a denied
// call assigns every column its own value, which InnoDB does not write.

var _ driver.RateLimiter = (*Store)(nil)

// nowMicros is the database clock in µs since the Unix epoch (UTC), one
// value for the whole statement.
const nowMicros = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', " + now + ")"

// ratesDDL: one row per key whose TAT (theoretical arrival time, GCRA) is
// ahead of the clock or passed less than Retention ago; the sweep deletes
// older ones. tat is in µs since the Unix epoch on the database clock;
// tag the random number of the call that last moved it, by which a call
// tells, in the row RETURNING gives it, its own admission from a denial
// (MariaDB's RETURNING has no old values). The index on tat serves the
// sweep.
func (n names) ratesDDL() string {
	return "CREATE TABLE IF NOT EXISTS " + n.rates + ` (
  name VARBINARY(1024) NOT NULL,
  tat BIGINT NOT NULL,
  tag BIGINT NOT NULL,
  PRIMARY KEY (name),
  KEY tat (tat)
) ENGINE=InnoDB`
}

// allowStmt is the decision: a fresh key is inserted admitted (n <= burst
// was checked); an existing row is admitted if GREATEST(tat, now) + (n -
// burst)·iv <= now, and then takes the call's tag and its TAT moves on by
// n·iv. tag is assigned before tat and both read only tat, which is not
// yet assigned, so the statement means the same whether MariaDB assigns
// left to right (the default) or all at once (SIMULTANEOUS_ASSIGNMENT).
// Arguments: key, n·iv, tag; (n - burst)·iv, tag; (n - burst)·iv, n·iv;
// tag. It returns the TAT after the call, whether the row holds the
// call's tag, and now.
func allowStmt(n names) string {
	admit := "GREATEST(tat, " + nowMicros + ") + ? <= " + nowMicros
	return "INSERT INTO " + n.rates + " (name, tat, tag) VALUES (?, " + nowMicros + " + ?, ?)" +
		" ON DUPLICATE KEY UPDATE tag = IF(" + admit + ", ?, tag)," +
		" tat = IF(" + admit + ", GREATEST(tat, " + nowMicros + ") + ?, tat)" +
		" RETURNING tat, tag = ?, " + nowMicros
}

// AllowN implements driver.RateLimiter in one statement (allowStmt: one
// round trip with interpolateParams=true, two with go-sql-driver's
// default) on the database clock (the interval rounded up to a µs): n of
// key's budget under limit, all or none (driver.GCRA). An admitted call
// moves the key's TAT on (a row of <p>_rates, created if missing); a
// denied one changes nothing. The call's admission is told by a random
// 64-bit tag: a denied call whose tag equals the admitted one before it
// (one chance in 2^64) would be reported admitted. Bad arguments
// (driver.ValidateRate, a key over MaxKeyBytes) and a closed store match
// driver.ErrInvalid before any I/O; a done ctx returns its error; a
// missing table (run Migrate) matches driver.ErrRefused; other errors
// leave the outcome unknown.
func (s *Store) AllowN(ctx context.Context, key string, limit driver.RateLimit, n int) (driver.RateResult, error) {
	if err := driver.ValidateRate(key, limit, n); err != nil {
		return driver.RateResult{}, err
	}
	if len(key) > MaxKeyBytes {
		return driver.RateResult{}, fmt.Errorf("%w: mysqlstore: key of %d bytes (at most %d)", driver.ErrInvalid, len(key), MaxKeyBytes)
	}
	if err := ctx.Err(); err != nil {
		return driver.RateResult{}, err
	}
	if s.acquirePrep.isClosed() {
		return driver.RateResult{}, errClosedStore
	}
	iv := int64((limit.Interval() + time.Microsecond - 1) / time.Microsecond)
	use, slack := int64(n)*iv, int64(n-limit.Burst)*iv
	tag := rand.Int64()
	var tat, nowUS int64
	var mine bool
	err := s.query(ctx, "allow", s.allowSQL, []any{&tat, &mine, &nowUS}, []byte(key), use, tag, slack, tag, slack, use, tag)
	if err != nil {
		return driver.RateResult{}, err
	}
	s.maybeSweep(ctx)
	return rateResult(mine, tat, nowUS, iv, limit.Burst, n)
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
		return driver.RateResult{}, fmt.Errorf("mysqlstore: allow: the database's decision (admitted %v, TAT %d at %d µs) is not GCRA's", allowed, tat, now)
	}
	return r, nil
}

// sweepRates deletes up to sweepBatch keys whose TAT passed more than
// Retention ago, by primary key after an unlocked read (as Sweep does for
// the lease table), re-checking the TAT under the row lock: a key admitted
// meanwhile stays. A schema without the rates table has nothing to sweep.
func (s *Store) sweepRates(ctx context.Context) (int, error) {
	old := nowMicros + " - " + strconv.FormatInt(s.opts.Retention.Microseconds(), 10)
	return s.sweepByKey(ctx, "SELECT name FROM "+s.n.rates+" WHERE tat < "+old+" LIMIT ?",
		"DELETE FROM "+s.n.rates+" WHERE name IN (%s) AND tat < "+old, "?", 1)
}
