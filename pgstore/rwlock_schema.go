package pgstore

// rwTemplate is the RWMutex's schema: %[1]s the holdings table (also the
// name hashed into the per-key advisory lock), %[2]s the fence sequence
// (the lease table's: fences of locks, permits and read-write holdings
// rise together), %[3]s the acquisition function.
//
// A function for the reason permitsTemplate gives: under READ COMMITTED
// each of its statements takes a new snapshot, after the transaction-scoped
// advisory lock on (hash of the table, hash of the key) that serializes
// the key's acquirers, so each counts what the ones before it committed.
// Writer-waiting marks are rows of mode 0, one per refused writer, each
// lasting p_mark_us after that writer's last refusal; a writer that gets
// in turns its own mark row into its holding.
const rwTemplate = `
-- Read-write lock holdings: one row per holding (mode 1 read, 2 write) or
-- writer-waiting mark (mode 0, fence 0), live or lately expired (a
-- release deletes its row; acquisitions and the sweep delete expired
-- ones). owner is the hex SHA-256 of the token; expires_at on the
-- database clock.
CREATE TABLE IF NOT EXISTS %[1]s (
    name       text        NOT NULL,
    owner      text        NOT NULL,
    mode       smallint    NOT NULL CHECK (mode BETWEEN 0 AND 2),
    fence      bigint      NOT NULL CHECK (fence >= 0),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (name, owner)
);

-- AcquireRead (p_mode 1) and AcquireWrite (2): status 1 granted (new, a
-- re-entry or a downgrade: o_fence, o_readers), 0 refused (o_held the
-- mode the key is held in, o_readers, o_mark a live mark, µs until the
-- first thing that refused it; a refused writer leaves its mark), -1 an
-- upgrade refused (nothing changed). A downgrade sends NOTIFY on the
-- table's channel with the key, as a release does. Serialized per key by a
-- transaction-scoped advisory lock; needs READ COMMITTED.
CREATE OR REPLACE FUNCTION %[3]s(p_name text, p_owner text, p_mode integer, p_ttl_us bigint, p_mark_us bigint,
    OUT o_status integer, OUT o_fence bigint, OUT o_readers integer, OUT o_held integer, OUT o_mark boolean, OUT o_remaining_us bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    writers integer;
    first timestamptz;
    mark_end timestamptz;
    mine integer;
    mine_fence bigint;
BEGIN
    o_status := 0; o_fence := 0; o_readers := 0; o_held := 0; o_mark := false; o_remaining_us := -1;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'dlock read-write locks need READ COMMITTED, not %%', current_setting('transaction_isolation')
            USING ERRCODE = '0A000';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('%[1]s'), hashtext(p_name));
    DELETE FROM %[1]s AS r WHERE r.name = p_name AND r.expires_at <= now();
    SELECT count(*) FILTER (WHERE r.mode = 1), count(*) FILTER (WHERE r.mode = 2),
           min(r.expires_at) FILTER (WHERE r.mode > 0), max(r.expires_at) FILTER (WHERE r.mode = 0)
        INTO o_readers, writers, first, mark_end FROM %[1]s AS r WHERE r.name = p_name;
    o_mark := mark_end IS NOT NULL;
    SELECT r.mode, r.fence INTO mine, mine_fence FROM %[1]s AS r WHERE r.name = p_name AND r.owner = p_owner AND r.mode > 0;
    IF FOUND THEN
        IF p_mode = 2 AND mine = 1 THEN
            o_status := -1;
            RETURN;
        END IF;
        UPDATE %[1]s AS r SET mode = p_mode, expires_at = greatest(r.expires_at, now() + p_ttl_us * interval '1 microsecond')
            WHERE r.name = p_name AND r.owner = p_owner;
        IF p_mode = 1 AND mine = 2 THEN
            PERFORM pg_notify('%[1]s', p_name);  -- a downgrade lets readers in
        END IF;
        o_status := 1; o_fence := mine_fence;
        o_readers := CASE WHEN p_mode = 2 THEN 0 WHEN mine = 2 THEN 1 ELSE o_readers END;
        RETURN;
    END IF;
    o_held := CASE WHEN writers > 0 THEN 2 WHEN o_readers > 0 THEN 1 ELSE 0 END;
    IF p_mode = 1 AND writers > 0 THEN
        o_remaining_us := (extract(epoch FROM first - now()) * 1000000)::bigint;
        RETURN;
    ELSIF p_mode = 1 AND o_mark THEN
        o_remaining_us := (extract(epoch FROM mark_end - now()) * 1000000)::bigint;
        RETURN;
    ELSIF p_mode = 2 AND o_held > 0 THEN
        INSERT INTO %[1]s AS r (name, owner, mode, fence, expires_at)
            VALUES (p_name, p_owner, 0, 0, now() + p_mark_us * interval '1 microsecond')
            ON CONFLICT (name, owner) DO UPDATE SET expires_at = EXCLUDED.expires_at;
        o_mark := true;
        o_remaining_us := (extract(epoch FROM first - now()) * 1000000)::bigint;
        RETURN;
    END IF;
    INSERT INTO %[1]s AS r (name, owner, mode, fence, expires_at)
        VALUES (p_name, p_owner, p_mode, nextval('%[2]s'), now() + p_ttl_us * interval '1 microsecond')
        ON CONFLICT (name, owner) DO UPDATE SET mode = EXCLUDED.mode, fence = EXCLUDED.fence, expires_at = EXCLUDED.expires_at
        RETURNING r.fence INTO o_fence;
    o_status := 1;
    o_readers := CASE WHEN p_mode = 1 THEN o_readers + 1 ELSE 0 END;
END
$fn$;
`
