package mysqlstore

import (
	"context"
	"strconv"
	"time"

	"example.com/dlock/driver"
)

// The waiter mark. MariaDB pushes nothing to a client, so a waiter of
// another process cannot be woken when the key is released; without help it
// backs off and seldom tries in the moment the key is free, while the
// holder's process hands the key from one of its goroutines to the next
// (measured: one of two processes got no turn at all). The mark makes the
// waiter visible on the row and keeps the key for it after a release:
//
//   - A contended Acquire (another owner holds the key) writes its token's
//     digest to next_owner if the row has no fresh mark or the mark is its
//     own, with next_since (when this waiter first marked: kept while the
//     mark is its own, unless it lapsed more than a second ago) and
//     next_due, the time the mark goes stale: now + hint + slack. The hint
//     is how soon the waiter promises to try again, clamp((now -
//     next_since)/8, 1 ms, 100 ms): a short wait polls every millisecond or
//     two, a 30 s hold costs about 10 statements a second. The slack,
//     max(2 ms, hint/2), covers a late retry (a round trip, a scheduling
//     delay). The statement returns whether the mark is the caller's and
//     the hint (driver.ContendedError.Retry): the Client pauses for it.
//   - While the mark is fresh and has been renewed at least once (the
//     waiter came back: it is waiting, not a TryLock or a one-off probe
//     that will never return), a free row (released, or expired: the same
//     rule) is reserved: an Acquire by any other token is contended, with
//     Remaining = the time until next_due; the marked token takes it and
//     the mark is cleared (next_due NULL). Release, Extend and Transfer do
//     not look at the mark: the reservation needs no statement of its own.
//     (Without the renewal rule the conformance suite's probes, a
//     contended Acquire by a token never seen again, kept a released key
//     from the next Acquire for 3 ms: measured, TransferIsANewHolding
//     failed.)
//   - A mark that goes stale (the waiter gave up, died or came late) bars
//     nobody. Fairness is best effort: exclusion and fences do not depend
//     on the mark (every holding still draws its fence from the sequence
//     under the row lock).
//
// Only one waiter is marked at a time (the first to find the mark free);
// the others back off as before. With the Client's local queue only the
// head of each process's queue talks to the store, so two processes
// alternate.

// markCfg are the mark's timings (tests shorten or disable them).
type markCfg struct {
	off                     bool // the statement without the mark (tests' control)
	minHint, maxHint, slack time.Duration
	div                     int // the hint is the time marked / div, clamped
}

var defaultMark = markCfg{minHint: time.Millisecond, maxHint: 100 * time.Millisecond, slack: 2 * time.Millisecond, div: 8}

func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

// acquireStmt builds Acquire's statement on the lease table n with the mark
// m. Arguments: key, digest, ttl µs, digest (for RETURNING).
//
// It returns owner, holds, fence, the remaining lease (µs), whether the mark
// is the caller's, the hint (µs) and the mark's remaining time (µs, 0 if
// none). MariaDB assigns left to right by default (later expressions see
// the new values) and all at once under sql_mode SIMULTANEOUS_ASSIGNMENT;
// the assignments are ordered so that both give the same result: the mark
// columns come first and read only the old owner and expiry; each condition
// that reads a mark column after it was assigned (open, bar, the hint's
// start) evaluates as it did before (see the comments); the holding's
// columns come last, as in the statement without the mark.
func acquireStmt(n names, m markCfg) string {
	L, F := n.locks, n.fence
	free := "expires_at <= " + now
	insert := "INSERT INTO " + L + " (name, owner, holds, fence, expires_at) VALUES (?, ?, 1, NEXTVAL(" + F + "), " + now + " + INTERVAL ? MICROSECOND)" +
		" ON DUPLICATE KEY UPDATE"
	if m.off {
		// The statement before the mark, kept for the tests' control
		// ("? IS NULL": false, it takes the digest argument).
		return insert +
			" holds = CASE WHEN " + free + " THEN 1 WHEN owner = VALUES(owner) THEN holds + 1 ELSE holds END," +
			" fence = IF(" + free + ", NEXTVAL(" + F + "), fence)," +
			" owner = IF(" + free + ", VALUES(owner), owner)," +
			" expires_at = CASE WHEN " + free + " THEN VALUES(expires_at) WHEN owner = VALUES(owner) THEN GREATEST(expires_at, VALUES(expires_at)) ELSE expires_at END" +
			" RETURNING owner, holds, fence, " + remaining + ", ? IS NULL, 0, 0"
	}
	// open: the mark may be the caller's (none is fresh, or it is its
	// own). bar: a free row is reserved for another token (its mark is
	// fresh and was renewed at least once: a waiter that tried once, a
	// TryLock or a probe, reserves nothing). Neither changes with the mark
	// assignments: a take makes the mark stale (bar stays false), a new
	// mark is the caller's (open true, bar false), else the mark stays.
	fresh := "((next_due > " + now + ") IS TRUE)"
	hu := m.minHint.Microseconds()
	first := strconv.FormatInt(hu+max(m.slack.Microseconds(), hu/2), 10) // a first mark's due - since
	open := "(next_owner = VALUES(owner) OR NOT " + fresh + ")"
	bar := "((next_owner <> VALUES(owner) AND " + fresh + " AND TIMESTAMPDIFF(MICROSECOND, next_since, next_due) > " + first + ") IS TRUE)"
	take := "(" + free + " AND NOT " + bar + ")"
	// markme: a live holder of another token, and the mark is open.
	markme := "(NOT " + free + " AND owner <> VALUES(owner) AND " + open + ")"
	// own: the mark is the caller's and lapsed less than a second ago:
	// its next_since is kept. Read after next_owner became the caller's
	// (left to right), it still picks the right start: next_since is
	// then already the kept one or now.
	own := "(next_owner = VALUES(owner) AND (next_due > " + now + " - INTERVAL 1 SECOND) IS TRUE)"
	hint := func(since string) string {
		return "LEAST(" + us(m.maxHint) + ", GREATEST(" + us(m.minHint) + ", TIMESTAMPDIFF(MICROSECOND, " + since + ", " + now + ") DIV " + strconv.Itoa(m.div) + "))"
	}
	h := hint("IF(" + own + ", next_since, " + now + ")")
	return insert +
		" next_since = IF(" + markme + ", IF(" + own + ", next_since, " + now + "), next_since)," +
		" next_owner = IF(" + markme + ", VALUES(owner), next_owner)," +
		" next_due = CASE WHEN " + take + " THEN NULL WHEN " + markme + " THEN " + now +
		" + INTERVAL (" + h + " + GREATEST(" + us(m.slack) + ", " + h + " DIV 2)) MICROSECOND ELSE next_due END," +
		// The holding: taken only if free and not reserved for another;
		// re-entered only if live and the caller's (a free row of the
		// caller's is not re-entered: it is taken, or reserved for
		// another).
		" holds = CASE WHEN " + take + " THEN 1 WHEN owner = VALUES(owner) AND NOT " + free + " THEN holds + 1 ELSE holds END," +
		" fence = IF(" + take + ", NEXTVAL(" + F + "), fence)," +
		" owner = IF(" + take + ", VALUES(owner), owner)," +
		// Second branch: not taken, so owner is unchanged.
		" expires_at = CASE WHEN " + take + " THEN VALUES(expires_at) WHEN owner = VALUES(owner) AND NOT " + free +
		" THEN GREATEST(expires_at, VALUES(expires_at)) ELSE expires_at END" +
		" RETURNING owner, holds, fence, " + remaining + "," +
		" (next_owner <=> ? AND (next_due > " + now + ") IS TRUE), IFNULL(" + hint("next_since") + ", 0)," +
		" IFNULL(TIMESTAMPDIFF(MICROSECOND, " + now + ", next_due), 0)"
}

// acquired is what Acquire's statement returns.
type acquired struct {
	row
	ours    bool          // the mark is the caller's
	hint    time.Duration // the caller's retry hint, if ours
	reserve time.Duration // the mark's remaining time (<= 0: none)
}

// acquire runs Acquire's statement (retrying a deadlock victim, as exec).
func (s *Store) acquire(ctx context.Context, key string, d []byte, ttl time.Duration) (acquired, error) {
	var a acquired
	var remainUS, hintUS, reserveUS int64
	err := s.queryPrepared(ctx, "acquire", &s.acquirePrep, s.acquireSQL,
		[]any{&a.owner, &a.holds, &a.fence, &remainUS, &a.ours, &hintUS, &reserveUS},
		[]byte(key), d, ttl.Microseconds(), d)
	if err != nil {
		return acquired{}, err
	}
	a.remain = time.Duration(remainUS) * time.Microsecond
	a.hint = time.Duration(hintUS) * time.Microsecond
	a.reserve = time.Duration(reserveUS) * time.Microsecond
	return a, nil
}

// contended is the error of an Acquire that did not take the key: another
// owner's live holding, or a free row reserved for another waiter.
func (a acquired) contended() *driver.ContendedError {
	ce := &driver.ContendedError{Remaining: a.remain}
	if a.remain <= 0 {
		// Free but reserved: the reservation's remaining time.
		ce.Remaining = max(a.reserve, time.Microsecond)
	}
	if a.ours {
		ce.Retry = a.hint
	}
	return ce
}
