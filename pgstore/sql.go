package pgstore

import "fmt"

// statements are the store's SQL for one set of names. Every lock
// operation is one statement (one round trip once pgx has prepared it on a
// connection; a key without a row takes insert after acquire, a refused
// release taken after release), run in its own implicit transaction under
// READ COMMITTED, and touches one row of the lease table: no serialization
// failures (those need REPEATABLE READ or SERIALIZABLE) and no deadlocks
// (one row lock per statement; insert takes its advisory lock before the
// row lock, the sweep takes advisory locks only with a try-lock; NOTIFY's
// lock taken last, at commit).
//
// Time is now(): the start of the statement's transaction on the database
// clock, one value for the whole statement (clock_timestamp() would move
// between the expiry test and the new expiry). A statement that waited for
// a row lock sees a now() earlier than the moment it got the row, which
// errs on the safe side both ways: a lease it sets ends no later than one
// set with the current time would, and a lease it tests is taken as expired
// only if it had ended before the statement began.
type statements struct {
	acquire, insert, extend, release string
	extendBatch                      string
	transfer, refused, taken, mark   string
	inspect, list, sweep             string
	breaks                           string
	// setMeta, inspectMeta and listMeta are the holder-metadata statements
	// (meta.go): they need the meta column, which tables migrated before
	// it lack.
	setMeta, inspectMeta, listMeta string
}

// ttl is the lease length parameter: microseconds as bigint.
const ttlExpr = `now() + $3::bigint * interval '1 microsecond'`

// acquireSet is the acquire's SET list, for the UPDATE of an existing row
// and for the ON CONFLICT branch of an insert ($2 the owner, $3 the ttl):
// a free row (expires_at <= now()) gets a new holding with a fence drawn
// here, under the row lock, and waited cleared (the waiters of the ended
// holding retry at its expiry or on its NOTIFY, and mark the new one); the
// owner's live row one more hold; another owner's live row is written back
// with waited set.
const acquireSet = `owner = CASE WHEN l.expires_at <= now() THEN $2 ELSE l.owner END,
    holds = CASE WHEN l.expires_at <= now() THEN 1 WHEN l.owner = $2 THEN l.holds + 1 ELSE l.holds END,
    fence = CASE WHEN l.expires_at <= now() THEN nextval('%[2]s') ELSE l.fence END,
    expires_at = CASE WHEN l.expires_at <= now() THEN ` + ttlExpr + `
                      WHEN l.owner = $2 THEN greatest(l.expires_at, ` + ttlExpr + `)
                      ELSE l.expires_at END,
    waited = l.expires_at > now() AND (l.waited OR l.owner <> $2)`

// metaExpr is the holding's metadata: meta's text after "<fence>:" when it
// starts with the row's fence (a later holding's row keeps an earlier
// one's meta until it writes its own), else the empty string.
const metaExpr = `CASE WHEN left(meta, length(fence::text) + 1) = fence::text || ':' THEN substr(meta, length(fence::text) + 2) ELSE '' END`

// remaining is the row's remaining time in microseconds (negative once
// expired).
const remainingExpr = `(extract(epoch FROM expires_at - now()) * 1000000)::bigint`

func newStatements(n names) statements {
	return statements{
		// acquire updates the key's row in place (a released or expired
		// row is free): a free row gets a new holding with a fence from the
		// sequence and waited cleared, the holder's token re-enters (fence
		// kept, expiry never shortened), and another holder's row is
		// written back with waited set (a contended attempt: the release of
		// that holding then sends NOTIFY, see release), so that RETURNING
		// reports the holder's remaining time in the same statement. A key
		// without a row (never locked, or swept) returns no row: the store
		// then runs insert.
		//
		// Fences follow the holding order without any other lock: the
		// UPDATE computes the new row after it holds the row lock (a
		// statement that waited for the lock re-evaluates its SET on the
		// latest version, nextval included), so a fence is drawn by the
		// holding's creator while it alone can change the row.
		acquire: fmt.Sprintf(`UPDATE %[1]s AS l SET `+acquireSet+`
WHERE l.name = $1
RETURNING owner = $2, fence, holds, `+remainingExpr, n.locks, n.fence),

		// insert is acquire for a key without a row. An insert draws its
		// fence before it may wait on a conflicting row, so without a lock
		// a later holding could be created and its row deleted while it
		// waits, and the insert would then land with the smaller fence. So
		// it first takes a transaction-scoped advisory lock on (hash of the
		// table, hash of the key), released at commit, and rows are deleted
		// only by the sweep, which deletes a row only under the same lock
		// (a try-lock: it never waits): no row can vanish between an
		// insert's draw and its write. A conflict (a row inserted or freed
		// meanwhile) takes the ON CONFLICT branch, acquire's SET, which
		// draws under the row lock. The two-int form of the advisory lock
		// does not share the key space of the one-bigint form that session
		// locks use.
		insert: fmt.Sprintf(`WITH lk AS MATERIALIZED (
  SELECT pg_advisory_xact_lock(hashtext('%[1]s'), hashtext($1))
)
INSERT INTO %[1]s AS l (name, owner, holds, fence, expires_at)
SELECT $1, $2, 1, nextval('%[2]s'), `+ttlExpr+` FROM lk
ON CONFLICT (name) DO UPDATE SET `+acquireSet+`
RETURNING owner = $2, fence, holds, `+remainingExpr, n.locks, n.fence),

		// extend moves a live holding's expiry to ttl from now; it never
		// re-creates a row. The third column tells a key held by another
		// owner, or whose holding by $2 Break ended (see breaks), from a
		// free one, for NotHeld(taken).
		extend: fmt.Sprintf(`WITH u AS (
  UPDATE %[1]s SET expires_at = `+ttlExpr+`
  WHERE name = $1 AND owner = $2 AND expires_at > now()
  RETURNING fence, holds
)
SELECT coalesce(u.fence, 0), coalesce(u.holds, 0),
  EXISTS (SELECT 1 FROM %[1]s WHERE name = $1 AND (owner <> $2 AND expires_at > now() OR owner = $2 AND expires_at = '-infinity'))
FROM (VALUES (1)) AS one LEFT JOIN u ON true`, n.locks),

		// extendBatch is extend for many holdings at once (arrays of names,
		// owners and ttls): it returns the 1-based index of each request
		// whose live holding it moved, with its fence and holds.
		extendBatch: fmt.Sprintf(`UPDATE %[1]s AS l SET expires_at = now() + r.ttl * interval '1 microsecond'
FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS r(name, owner, ttl, i)
WHERE l.name = r.name AND l.owner = r.owner AND l.expires_at > now()
RETURNING r.i, l.fence, l.holds`, n.locks),

		// release takes one hold off the owner's live row, or on the last
		// hold frees it: its expiry set to the epoch (long past). The row
		// stays, so that the next acquire of the key updates it in place
		// (no insert, no new index entry, no advisory lock); the sweep
		// deletes free rows. A freed holding that a contended Acquire or a
		// Subscribe marked (waited) sends NOTIFY in the same transaction
		// (delivered at commit); an unmarked one sends nothing, which
		// spares the commit the notification queue's global lock and write
		// when nobody waits. waited stays on the free row (a takeover
		// clears it). It returns whether the row was freed and the NOTIFYs
		// sent, or no row if token holds nothing (the store then runs
		// taken).
		release: fmt.Sprintf(`UPDATE %[1]s AS l SET holds = greatest(l.holds - 1, 1),
  expires_at = CASE WHEN l.holds = 1 THEN timestamptz 'epoch' ELSE l.expires_at END
WHERE l.name = $1 AND l.owner = $2 AND l.expires_at > now()
RETURNING l.expires_at = timestamptz 'epoch',
  CASE WHEN l.expires_at = timestamptz 'epoch' AND l.waited THEN (SELECT count(*) FROM (SELECT pg_notify($3, l.name)) AS n) ELSE 0 END`, n.locks),

		// taken tells, after a refused release, a key held by another
		// owner (or whose holding by $2 Break ended) from a free one, for
		// NotHeld(taken).
		taken: fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %[1]s WHERE name = $1 AND (owner <> $2 AND expires_at > now() OR owner = $2 AND expires_at = '-infinity'))`, n.locks),

		// transfer gives a live single-hold holding of $2 to $3 with a new
		// fence drawn under the row lock (cur locks the row before the
		// UPDATE computes it), without NOTIFY: the key is never free. The
		// row's waited mark stays (the waiters of other processes still
		// wait). It reports the new fence (0 if nothing changed), the holds
		// $2 had, and whether another owner holds the key.
		transfer: fmt.Sprintf(`UPDATE %[1]s SET owner = $3, holds = 1, fence = nextval('%[2]s'), expires_at = now() + $4::bigint * interval '1 microsecond'
WHERE name = $1 AND owner = $2 AND holds = 1 AND expires_at > now() RETURNING fence`, n.locks, n.fence),
		// refused tells, after a transfer that changed nothing, a
		// re-entered holding of $2 (its holds) from a key held by another
		// owner or free.
		refused: fmt.Sprintf(`SELECT coalesce((SELECT holds FROM %[1]s WHERE name = $1 AND owner = $2 AND expires_at > now()), 0),
  EXISTS (SELECT 1 FROM %[1]s WHERE name = $1 AND owner <> $2 AND expires_at > now())`, n.locks),

		// mark sets waited on key's live row, for Subscribe: the release
		// of the holding it finds then sends NOTIFY. A row already marked
		// is not written again.
		mark: fmt.Sprintf(`UPDATE %[1]s SET waited = true WHERE name = $1 AND expires_at > now() AND NOT waited`, n.locks),

		inspect: fmt.Sprintf(`SELECT owner, holds, fence, `+remainingExpr+`
FROM %[1]s WHERE name = $1 AND expires_at > now()`, n.locks),

		// setMeta records $3, "<fence>:<metadata>", with the live holding
		// of fence $2 (a new holding's, right after its acquire).
		setMeta: fmt.Sprintf(`UPDATE %[1]s SET meta = $3 WHERE name = $1 AND fence = $2 AND expires_at > now()`, n.locks),
		// inspectMeta and listMeta are inspect and list with the holding's
		// metadata: meta's text after "<fence>:" if it starts with the
		// row's fence, else the empty string.
		inspectMeta: fmt.Sprintf(`SELECT owner, holds, fence, `+remainingExpr+`, `+metaExpr+`
FROM %[1]s WHERE name = $1 AND expires_at > now()`, n.locks),
		listMeta: fmt.Sprintf(`SELECT name, owner, holds, fence, `+remainingExpr+`, `+metaExpr+`
FROM %[1]s WHERE left(name, length($1)) = $1 AND expires_at > now()`, n.locks),

		// list: live rows whose name starts with $1 (compared as a prefix,
		// not a LIKE pattern, so % and _ in names mean themselves).
		list: fmt.Sprintf(`SELECT name, owner, holds, fence, `+remainingExpr+`
FROM %[1]s WHERE left(name, length($1)) = $1 AND expires_at > now()`, n.locks),

		// breaks frees key's live row whoever holds it: its expiry set to
		// -infinity, which is free as the epoch of a release is, and which
		// extend and taken read as "Break ended this owner's holding"
		// until a new holding or the sweep replaces the row. The fence
		// sequence is not touched. It always sends NOTIFY (waiters wake)
		// and returns the holding it ended, or no row for a free key.
		breaks: fmt.Sprintf(`WITH o AS MATERIALIZED (
  SELECT name, owner, holds, fence, expires_at FROM %[1]s WHERE name = $1 AND expires_at > now() FOR UPDATE
)
UPDATE %[1]s AS l SET expires_at = timestamptz '-infinity' FROM o WHERE l.name = o.name
RETURNING o.holds, o.fence, (extract(epoch FROM o.expires_at - now()) * 1000000)::bigint,
  (SELECT count(*) FROM (SELECT pg_notify($2, l.name)) AS n)`, n.locks),

		// sweep deletes up to $1 free rows (released, or expired), skipping
		// rows another statement has locked (a concurrent sweep, an acquire
		// re-taking the key) and keys whose advisory lock an inserting
		// acquire holds (see acquire: a row is deleted only under that
		// lock, taken with a try-lock on the candidates only, so the sweep
		// never waits for it).
		sweep: fmt.Sprintf(`WITH c AS MATERIALIZED (
  SELECT name FROM %[1]s WHERE expires_at <= now() LIMIT $1 FOR UPDATE SKIP LOCKED
), k AS MATERIALIZED (
  SELECT name FROM c WHERE pg_try_advisory_xact_lock(hashtext('%[1]s'), hashtext(name))
)
DELETE FROM %[1]s WHERE name IN (SELECT name FROM k)`, n.locks),
	}
}
