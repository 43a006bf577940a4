package pgstore

import "fmt"

// statements are the store's SQL for one set of names. Every lock
// operation is one statement (one round trip once pgx has prepared it on a
// connection), run in its own implicit transaction under READ COMMITTED,
// and touches one row of the lease table: no serialization failures (those
// need REPEATABLE READ or SERIALIZABLE) and no deadlocks (one row lock per
// statement, NOTIFY's lock taken last, at commit).
//
// Time is now(): the start of the statement's transaction on the database
// clock, one value for the whole statement (clock_timestamp() would move
// between the expiry test and the new expiry). A statement that waited for
// a row lock sees a now() earlier than the moment it got the row, which
// errs on the safe side both ways: a lease it sets ends no later than one
// set with the current time would, and a lease it tests is taken as expired
// only if it had ended before the statement began.
type statements struct {
	acquire, extend, release, transfer string
	inspect, list, sweep               string
	mark                               string
}

// ttl is the lease length parameter: microseconds as bigint.
const ttlExpr = `now() + $3::bigint * interval '1 microsecond'`

// remaining is the row's remaining time in microseconds (negative once
// expired).
const remainingExpr = `(extract(epoch FROM expires_at - now()) * 1000000)::bigint`

func newStatements(n names) statements {
	return statements{
		// acquire inserts a row for a free key; on a row that exists it
		// re-creates the holding if the row has expired, adds a hold for
		// the same owner (fence kept, expiry never shortened), and
		// otherwise writes the row back unchanged, so that RETURNING
		// reports the holder's remaining time in the same statement. The
		// fence is drawn from the sequence on every call, used only for a
		// new holding (gaps are harmless: fences only need to increase).
		//
		// The fence is drawn before the row is written, and an insert can
		// wait (for a release deleting the row) between the two: two
		// acquires waiting there could insert in the other order than they
		// drew, and the later holding would get the smaller fence. So every
		// acquire of a key first takes a transaction-scoped advisory lock
		// on (hash of the table, hash of the key), released at commit:
		// acquires of one key draw and write one at a time, in order.
		// Releases, extensions and sweeps do not take it (no lock cycle),
		// and the two-int form of the lock does not share the key space of
		// the one-bigint form that session locks use.
		//
		// A contended attempt (another owner's live row) sets waited, so
		// that the release of that holding sends NOTIFY (see release);
		// waited survives re-entries, transfers and a takeover of the
		// expired row (at most one needless NOTIFY), and a new row starts
		// without it.
		acquire: fmt.Sprintf(`WITH lk AS MATERIALIZED (
  SELECT pg_advisory_xact_lock(hashtext('%[1]s'), hashtext($1))
)
INSERT INTO %[1]s AS l (name, owner, holds, fence, expires_at)
SELECT $1, $2, 1, nextval('%[2]s'), `+ttlExpr+` FROM lk
ON CONFLICT (name) DO UPDATE SET
  owner = CASE WHEN l.expires_at <= now() THEN excluded.owner ELSE l.owner END,
  holds = CASE WHEN l.expires_at <= now() THEN 1
               WHEN l.owner = excluded.owner THEN l.holds + 1 ELSE l.holds END,
  fence = CASE WHEN l.expires_at <= now() THEN excluded.fence ELSE l.fence END,
  expires_at = CASE WHEN l.expires_at <= now() THEN excluded.expires_at
                    WHEN l.owner = excluded.owner THEN greatest(l.expires_at, excluded.expires_at)
                    ELSE l.expires_at END,
  waited = l.waited OR (l.expires_at > now() AND l.owner <> excluded.owner)
RETURNING owner = $2, fence, holds, `+remainingExpr, n.locks, n.fence),

		// extend moves a live holding's expiry to ttl from now; it never
		// re-creates a row. The second column tells a key held by another
		// owner from a free one, for NotHeld(taken).
		extend: fmt.Sprintf(`WITH u AS (
  UPDATE %[1]s SET expires_at = `+ttlExpr+`
  WHERE name = $1 AND owner = $2 AND expires_at > now()
  RETURNING fence, holds
)
SELECT coalesce(u.fence, 0), coalesce(u.holds, 0),
  EXISTS (SELECT 1 FROM %[1]s WHERE name = $1 AND owner <> $2 AND expires_at > now())
FROM (VALUES (1)) AS one LEFT JOIN u ON true`, n.locks),

		// release locks the owner's live row (FOR UPDATE returns its latest
		// version under READ COMMITTED), then deletes it if this was the
		// last hold, or takes one hold off. A deleted row that a contended
		// Acquire or a Subscribe marked (waited) sends NOTIFY in the same
		// transaction (delivered at commit); an unmarked one sends nothing,
		// which spares the commit the notification queue's global lock and
		// write when nobody waits.
		release: fmt.Sprintf(`WITH cur AS (
  SELECT holds FROM %[1]s WHERE name = $1 AND owner = $2 AND expires_at > now() FOR UPDATE
), d AS (
  DELETE FROM %[1]s WHERE name = $1 AND owner = $2 AND (SELECT holds FROM cur) = 1 RETURNING name, waited
), u AS (
  UPDATE %[1]s SET holds = holds - 1 WHERE name = $1 AND owner = $2 AND (SELECT holds FROM cur) > 1 RETURNING holds
)
SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM u),
  (SELECT count(*) FROM (SELECT pg_notify($3, d.name) FROM d WHERE d.waited) AS n),
  EXISTS (SELECT 1 FROM %[1]s WHERE name = $1 AND owner <> $2 AND expires_at > now())`, n.locks),

		// transfer gives a live single-hold holding of $2 to $3 with a new
		// fence, under the acquire's advisory lock (taken before the row
		// lock, as acquire does, so no lock cycle), without NOTIFY: the key
		// is never free. It reports the new fence (0 if nothing changed),
		// the holds $2 had, and whether another owner holds the key.
		transfer: fmt.Sprintf(`WITH lk AS MATERIALIZED (
  SELECT pg_advisory_xact_lock(hashtext('%[1]s'), hashtext($1))
), cur AS (
  SELECT holds FROM %[1]s
  WHERE name = $1 AND owner = $2 AND expires_at > now() AND EXISTS (SELECT 1 FROM lk) FOR UPDATE
), u AS (
  UPDATE %[1]s SET owner = $3, holds = 1, fence = nextval('%[2]s'), expires_at = now() + $4::bigint * interval '1 microsecond'
  WHERE name = $1 AND owner = $2 AND (SELECT holds FROM cur) = 1 RETURNING fence
)
SELECT coalesce((SELECT fence FROM u), 0), coalesce((SELECT holds FROM cur), 0),
  EXISTS (SELECT 1 FROM %[1]s WHERE name = $1 AND owner <> $2 AND expires_at > now())`, n.locks, n.fence),

		// mark sets waited on key's live row, for Subscribe: the release
		// of the holding it finds then sends NOTIFY. A row already marked
		// is not written again.
		mark: fmt.Sprintf(`UPDATE %[1]s SET waited = true WHERE name = $1 AND expires_at > now() AND NOT waited`, n.locks),

		inspect: fmt.Sprintf(`SELECT owner, holds, fence, `+remainingExpr+`
FROM %[1]s WHERE name = $1 AND expires_at > now()`, n.locks),

		// list: live rows whose name starts with $1 (compared as a prefix,
		// not a LIKE pattern, so % and _ in names mean themselves).
		list: fmt.Sprintf(`SELECT name, owner, holds, fence, `+remainingExpr+`
FROM %[1]s WHERE left(name, length($1)) = $1 AND expires_at > now()`, n.locks),

		// sweep deletes up to $1 rows that expired, skipping rows another
		// statement has locked (a concurrent sweep, an acquire re-taking
		// the key).
		sweep: fmt.Sprintf(`DELETE FROM %[1]s WHERE name IN (
  SELECT name FROM %[1]s WHERE expires_at <= now() LIMIT $1 FOR UPDATE SKIP LOCKED)`, n.locks),
	}
}
