package mysqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"example.com/dlock/driver"
)

// AcquirePermits is one statement: a compound statement (BEGIN NOT ATOMIC,
// MariaDB's) that runs the acquisition's READ COMMITTED transaction on the
// server, so that its steps (the anchor's lock, the read, the prune, the
// insert, the commit) cost one round trip instead of one each (measured
// by TestPermitRoundTrips). It answers
// one row: the outcome (1 granted, 0 taken, -1 another limit, -2 another
// k), the fence, the permits out after the call, the stored limit, the µs
// until the earliest expiry and the caller's permits before the call. An
// error rolls the transaction back and is passed on (RESIGNAL).

// acquirePermitsStmt builds the compound statement from the anchor and
// read statements (anchorStmt, readPermitsStmt, or a test's variants). Its
// parameters: key, owner digest, n, k, ttl in µs.
func acquirePermitsStmt(n names, anchor, read string) string {
	anchor = strings.Replace(anchor, "?", "p_key", 1)
	read = strings.Replace(read, "?", "p_owner", 2)
	read = strings.Replace(read, "?", "p_key", 1)
	read = strings.Replace(read, " FROM "+n.permits+" ", " INTO v_live, v_used, v_lim, v_first, v_expired, v_mine, v_fence FROM "+n.permits+" ", 1)
	expiry := now + " + INTERVAL p_us MICROSECOND"
	return `BEGIN NOT ATOMIC
DECLARE p_key VARBINARY(1024) DEFAULT ?;
DECLARE p_owner BINARY(32) DEFAULT ?;
DECLARE p_n INT DEFAULT ?;
DECLARE p_k INT DEFAULT ?;
DECLARE p_us BIGINT DEFAULT ?;
DECLARE v_live, v_used, v_lim, v_expired, v_mine, v_out INT DEFAULT 0;
DECLARE v_first BIGINT DEFAULT -1;
DECLARE v_fence BIGINT UNSIGNED DEFAULT 0;
DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
START TRANSACTION;
` + anchor + `;
` + read + `;
IF v_expired > 0 THEN
DELETE FROM ` + n.permits + ` WHERE name = p_key AND expires_at <= ` + now + `;
` + read + `;
END IF;
IF v_live > 0 AND v_lim <> p_n THEN SET v_out = -1;
ELSEIF v_mine > 0 AND v_mine <> p_k THEN SET v_out = -2;
ELSEIF v_mine > 0 THEN
UPDATE ` + n.permits + ` SET expires_at = GREATEST(expires_at, ` + expiry + `) WHERE name = p_key AND owner = p_owner;
SET v_out = 1;
ELSEIF v_used + p_k > p_n THEN SET v_out = 0;
ELSE
SET v_fence = NEXTVAL(` + n.fence + `);
INSERT INTO ` + n.permits + ` (name, owner, permits, lim, fence, expires_at) VALUES (p_key, p_owner, p_k, p_n, v_fence, ` + expiry + `);
SET v_out = 1, v_used = v_used + p_k;
END IF;
IF v_out = 1 THEN COMMIT; ELSE ROLLBACK; END IF;
SELECT v_out, v_fence, v_used, v_lim, v_first, v_mine;
END`
}

// acquirePermits runs the compound statement, prepared on the server (it
// is long: parsed once per connection, not per call), again (up to 3 times
// in all) if it was chosen as a deadlock's victim, and returns the grant or
// the refusal it answered.
func (s *Store) acquirePermits(ctx context.Context, key string, d []byte, n, k int, ttl time.Duration) (driver.PermitGrant, error) {
	var (
		out, used, lim, mine int
		fence                uint64
		firstUS              int64
	)
	err := s.queryPrepared(ctx, "acquire permits", &s.permitsPrep, s.acquirePermitsSQL,
		[]any{&out, &fence, &used, &lim, &firstUS, &mine}, []byte(key), d, n, k, ttl.Microseconds())
	switch {
	case err != nil:
		return driver.PermitGrant{}, err
	case out == 1:
		return driver.PermitGrant{Fence: fence, Permits: k, Used: used, TTL: ttl}, nil
	case out == 0:
		return driver.PermitGrant{}, &driver.PermitsTakenError{Used: used, Limit: n, Remaining: time.Duration(firstUS) * time.Microsecond}
	case out == -1:
		return driver.PermitGrant{}, &driver.LimitMismatchError{Stored: lim, Asked: n}
	}
	return driver.PermitGrant{}, fmt.Errorf("%w: mysqlstore: the token holds %d permits of the key, asked for %d", driver.ErrInvalid, mine, k)
}
